/**
 * A real Prometheus and a real Alertmanager (Debian's binaries) on loopback
 * for end-to-end tests: each in a temp directory with its own storage, found
 * ready through /-/ready, stopped with its process; plus Prometheus' HTTP API.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { stringify as toYaml } from "yaml";
import { waitUntil } from "./processes.ts";

export interface Daemon {
  url: string;
  /** Output so far (for failure messages). */
  output(): string;
  stop(): Promise<void>;
}

/** A port free on 127.0.0.1 right now (neither daemon reports the port it picked for :0). */
export function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

async function startDaemon(bin: string, args: (dir: string, port: number) => string[], files: Record<string, unknown>): Promise<Daemon> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-prom-"));
  for (const [name, content] of Object.entries(files)) writeFileSync(join(dir, name), typeof content === "string" ? content : toYaml(content));
  const port = freePort();
  const proc = Bun.spawn([bin, ...args(dir, port)], { cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let out = "";
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const chunk of s) out = (out + new TextDecoder().decode(chunk)).slice(-20_000);
  };
  void pump(proc.stdout);
  void pump(proc.stderr);
  const url = `http://127.0.0.1:${port}`;
  const daemon: Daemon = {
    url,
    output: () => out,
    async stop() {
      proc.kill("SIGTERM");
      const killer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
      await proc.exited;
      clearTimeout(killer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    await waitUntil(async () => proc.exitCode === null && (await fetch(`${url}/-/ready`)).ok, { what: `${bin} ready`, timeoutMs: 20_000, intervalMs: 100 });
  } catch (err) {
    await daemon.stop();
    throw new Error(`${String(err)}\n${out.slice(-3000)}`);
  }
  return daemon;
}

/** Prometheus with `config` (prometheus.yml) and rule files written beside it. */
export function startPrometheus(bin: string, config: Record<string, unknown>, ruleFiles: Record<string, unknown> = {}): Promise<Daemon> {
  return startDaemon(
    bin,
    (dir, port) => [`--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`],
    { "prometheus.yml": config, ...ruleFiles },
  );
}

/** Alertmanager with `config`, clustering off. */
export function startAlertmanager(bin: string, config: Record<string, unknown>): Promise<Daemon> {
  return startDaemon(
    bin,
    (dir, port) => [`--config.file=${join(dir, "alertmanager.yml")}`, `--storage.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${port}`, "--cluster.listen-address="],
    { "alertmanager.yml": config },
  );
}

export interface PromSample {
  metric: Record<string, string>;
  value: number;
}

/** An instant query through Prometheus' HTTP API; throws on a query error. */
export async function promQuery(prometheus: string, expr: string): Promise<PromSample[]> {
  const res = await fetch(`${prometheus}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await res.json()) as { status: string; error?: string; data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] } };
  if (body.status !== "success" || !body.data) throw new Error(`query ${expr}: ${body.error ?? res.status}`);
  if (body.data.resultType !== "vector") return [];
  return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}
