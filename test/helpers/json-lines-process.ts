/** A child process that answers in JSON lines on stdout and takes commands as lines on stdin (the Python ZMQ peers of the interop tests). */
import type { Subprocess } from "bun";

export class JsonLinesProcess {
  readonly lines: Array<Record<string, unknown>> = [];
  private stderr = "";
  private readonly proc: Subprocess<"pipe", "pipe", "pipe">;

  constructor(argv: string[]) {
    this.proc = Bun.spawn(argv, { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
    void this.read();
    void new Response(this.proc.stderr).text().then((t) => (this.stderr = t));
  }

  get pid(): number {
    return this.proc.pid;
  }

  get exited(): Promise<number> {
    return this.proc.exited;
  }

  /** The first line (from `from` on) that satisfies `match`, waiting up to `timeoutMs`. */
  async line(match: (l: Record<string, unknown>) => boolean, timeoutMs = 15_000, from = 0): Promise<Record<string, unknown>> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.lines.slice(from).find(match);
      if (found) return found;
      if (Date.now() > deadline || this.proc.exitCode !== null) {
        throw new Error(
          `no matching line from ${this.proc.pid} (exit ${this.proc.exitCode}); lines: ${JSON.stringify(this.lines).slice(0, 2000)}; stderr: ${this.stderr.slice(0, 2000)}`,
        );
      }
      await Bun.sleep(20);
    }
  }

  send(line: string): void {
    this.proc.stdin.write(`${line}\n`);
    this.proc.stdin.flush();
  }

  kill(signal: NodeJS.Signals = "SIGKILL"): Promise<number> {
    this.proc.kill(signal);
    return this.proc.exited;
  }

  private async read(): Promise<void> {
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const chunk of this.proc.stdout) {
      buffered += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffered.indexOf("\n")) >= 0) {
        const text = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (text.trim() !== "") this.lines.push(JSON.parse(text) as Record<string, unknown>);
      }
    }
  }
}
