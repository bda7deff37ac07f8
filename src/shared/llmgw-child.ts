/**
 * Start `llmgw <command>` as a child process (its own process group, the
 * llmgw Bun environment) and wait for its "listening" log lines, which carry
 * the real ports of listeners started on port 0. Used by demo, bench and the
 * integration tests.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { childEnv } from "./process-env.ts";

export const REPO_ROOT = join(import.meta.dir, "..", "..");
export const CLI_PATH = join(REPO_ROOT, "src", "cli.ts");

export interface LlmgwChild {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  /** Listening URLs by listener name ("api", "admin", "dcgm", "agent" …). */
  urls: Record<string, string>;
  /** The first listening URL. */
  readonly url: string;
  /** The last 200 kB of output, for failure messages. */
  output(): string;
  /** Signal the whole process group, SIGKILL after 5 s; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number>;
}

const live = new Set<LlmgwChild>();

/** Write a gateway config (listeners on port 0 unless `config` sets them) to a new temp file; returns its path. */
export function writeGatewayConfig(config: Record<string, unknown>): string {
  const path = join(mkdtempSync(join(tmpdir(), "llmgw-config-")), "llmgw.yaml");
  writeFileSync(path, toYaml({ listen: "127.0.0.1:0", admin_listen: "127.0.0.1:0", ...config }));
  return path;
}

export async function spawnLlmgw(
  args: string[],
  opts: {
    waitFor?: number;
    timeoutMs?: number;
    env?: Record<string, string>;
    echo?: boolean;
    script?: string;
    launcher?: string[];
    runtimeArgs?: string[];
  } = {},
): Promise<LlmgwChild> {
  const { waitFor = 1, timeoutMs = 15_000 } = opts;
  // `script` runs another entry file (e.g. the bench's bare proxy) the same way;
  // `launcher` starts through one of bin/ instead of Bun directly (its tests);
  // `runtimeArgs` go to Bun itself (e.g. --cpu-prof).
  const command = opts.launcher ?? [process.execPath, ...(opts.runtimeArgs ?? []), opts.script ?? CLI_PATH];
  const proc = Bun.spawn([...command, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid), ...opts.env }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
  let out = "";
  const urls: Record<string, string> = {};
  let seen = 0;
  let markReady: () => void = () => {};
  const ready = new Promise<void>((r) => (markReady = r));

  const pump = async (stream: ReadableStream<Uint8Array>, sink: NodeJS.WriteStream) => {
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of stream) {
      const text = decoder.decode(chunk, { stream: true });
      if (opts.echo) sink.write(text);
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
            if (++seen >= waitFor) markReady();
          }
        } catch {
          // not a JSON log line
        }
      }
    }
  };
  const pumped = Promise.all([pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr)]);
  pumped.catch(() => {});

  const child: LlmgwChild = {
    proc,
    urls,
    get url() {
      return Object.values(urls)[0] ?? "";
    },
    output: () => out,
    async stop(signal = "SIGTERM") {
      live.delete(child);
      const kill = (sig: NodeJS.Signals) => {
        try {
          process.kill(-proc.pid, sig);
        } catch {
          // the group is gone already
        }
      };
      kill(signal);
      const killer = setTimeout(() => kill("SIGKILL"), 5_000);
      const code = await proc.exited;
      clearTimeout(killer);
      kill("SIGKILL"); // anything the leader left behind in its group
      return code;
    },
  };
  live.add(child);

  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<"timeout">((r) => (timer = setTimeout(() => r("timeout"), timeoutMs)));
  const outcome = await Promise.race([ready.then(() => "ready" as const), timeout, proc.exited.then(() => "exited" as const)]);
  clearTimeout(timer);
  if (outcome !== "ready") {
    await child.stop("SIGKILL");
    // What it said before it went: its first lines name the cause (a usage error precedes a long usage text).
    await Promise.race([pumped, Bun.sleep(1_000)]).catch(() => {});
    const said = out.length <= 4_000 ? out : `${out.slice(0, 2_000)}\n…\n${out.slice(-2_000)}`;
    throw new Error(`llmgw ${args.join(" ")}: ${outcome} before listening\n${said}`);
  }
  return child;
}

/** Stop every child started here and not stopped yet. */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...live].map((c) => c.stop()));
}
