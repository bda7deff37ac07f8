/**
 * Real llmgw processes for integration tests: spawned with the llmgw
 * environment, on port 0, found ready through their "listening" log line,
 * and killed (whole process group) when the test ends.
 */
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";

export const REPO_ROOT = join(import.meta.dir, "..", "..");
export const CLI = join(REPO_ROOT, "src", "cli.ts");

export interface Started {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** Every "listening" line seen, by its `name` field ("api", "admin", "dcgm", …). */
  urls: Record<string, string>;
  /** The first listening URL. */
  url: string;
  /** Output so far (stdout and stderr), for failure messages. */
  output(): string;
  stop(signal?: NodeJS.Signals): Promise<number>;
}

const live = new Set<Started>();

/**
 * Start `llmgw <args>` and resolve once it has logged `waitFor` listening
 * lines (JSON log lines with msg "listening" and a `url`).
 */
export async function startLlmgw(args: string[], opts: { waitFor?: number; timeoutMs?: number; env?: Record<string, string> } = {}): Promise<Started> {
  const { waitFor = 1, timeoutMs = 15_000 } = opts;
  const proc = Bun.spawn([process.execPath, CLI, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_LOG_LEVEL: process.env.LLMGW_TEST_LOG_LEVEL ?? "info", ...opts.env }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  let out = "";
  const urls: Record<string, string> = {};
  let seen = 0;
  let resolveReady: () => void = () => {};
  const ready = new Promise<void>((r) => (resolveReady = r));

  const pump = async (stream: ReadableStream<Uint8Array>) => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of stream) {
      const text = decoder.decode(chunk, { stream: true });
      out = (out + text).slice(-200_000);
      buf += text;
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (!line.includes('"listening"')) continue;
        try {
          const rec = JSON.parse(line) as { msg?: string; url?: string; name?: string };
          if (rec.msg === "listening" && rec.url) {
            urls[rec.name ?? `#${seen}`] = rec.url;
            seen++;
            if (seen >= waitFor) resolveReady();
          }
        } catch {
          // not a JSON line
        }
      }
    }
  };
  void pump(proc.stdout);
  void pump(proc.stderr);

  const started: Started = {
    proc,
    urls,
    get url() {
      return Object.values(urls)[0] ?? "";
    },
    output: () => out,
    async stop(signal = "SIGTERM") {
      live.delete(started);
      try {
        process.kill(-proc.pid, signal);
      } catch {
        // already gone
      }
      const killer = setTimeout(() => {
        try {
          process.kill(-proc.pid, "SIGKILL");
        } catch {
          // already gone
        }
      }, 5_000);
      const code = await proc.exited;
      clearTimeout(killer);
      return code;
    },
  };
  live.add(started);

  const timer = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), timeoutMs));
  const exited = proc.exited.then(() => "exited" as const);
  const outcome = await Promise.race([ready.then(() => "ready" as const), timer, exited]);
  if (outcome !== "ready") {
    await started.stop("SIGKILL");
    throw new Error(`llmgw ${args.join(" ")}: ${outcome} before listening\n${out}`);
  }
  return started;
}

/** Stop every process a test started and did not stop itself. */
export async function stopAll(): Promise<void> {
  await Promise.all([...live].map((p) => p.stop()));
}

/** Poll `fn` until it returns a truthy value or the time is up. */
export async function waitUntil<T>(fn: () => Promise<T> | T, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 50, what = "condition" } = opts;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      last = err;
    }
    await Bun.sleep(intervalMs);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}
