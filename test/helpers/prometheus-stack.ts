/**
 * A real Prometheus and a real Alertmanager (Debian's binaries) on loopback
 * for end-to-end tests: each in a temp directory with its own storage, found
 * ready through /-/ready, stopped with its process; plus Prometheus' HTTP API.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parse as parseYaml, stringify as toYaml } from "yaml";
import { diesWithParent } from "../../src/shared/parent-binding.ts";
import { REPO_ROOT, waitUntil } from "./processes.ts";

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
  const proc = Bun.spawn(diesWithParent([bin, ...args(dir, port)]), { cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
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
    (dir, port) => [
      `--config.file=${join(dir, "alertmanager.yml")}`,
      `--storage.path=${join(dir, "data")}`,
      `--web.listen-address=127.0.0.1:${port}`,
      "--cluster.listen-address=",
    ],
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
  const body = (await res.json()) as {
    status: string;
    error?: string;
    data?: { resultType: string; result: { metric: Record<string, string>; value: [number, string] }[] };
  };
  if (body.status !== "success" || !body.data) throw new Error(`query ${expr}: ${body.error ?? res.status}`);
  if (body.data.resultType !== "vector") return [];
  return body.data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
}

const MONITORING = join(REPO_ROOT, "deploy", "monitoring");

/** A shipped rule file with every `for:` at 0s, so a test need not wait minutes. */
function rulesWithoutWaiting(file: string): Record<string, unknown> {
  const doc = parseYaml(readFileSync(join(MONITORING, file), "utf8")) as { groups: { rules: { for?: string }[] }[] };
  for (const g of doc.groups) for (const r of g.rules) if (r.for !== undefined) r.for = "0s";
  return doc as unknown as Record<string, unknown>;
}

/**
 * The shipped deploy/monitoring/prometheus.yml with test settings — 1 s
 * intervals, its one scrape job aimed at `target` (host:port), alerts to
 * `alertmanager` (host:port) — and its rule files with `for:` at 0s.
 */
export function shippedPrometheusConfig(target: string, alertmanager: string): { config: Record<string, unknown>; ruleFiles: Record<string, unknown> } {
  const shipped = parseYaml(readFileSync(join(MONITORING, "prometheus.yml"), "utf8")) as {
    global: Record<string, string>;
    rule_files: string[];
    scrape_configs: { static_configs: { targets: string[] }[] }[];
    alerting: { alertmanagers: { static_configs: { targets: string[] }[] }[] };
  };
  if (shipped.scrape_configs.length !== 1)
    throw new Error(`prometheus.yml: expected one scrape job (one target for the fleet), found ${shipped.scrape_configs.length}`);
  shipped.global = { scrape_interval: "1s", evaluation_interval: "1s" };
  shipped.scrape_configs[0]!.static_configs = [{ targets: [target] }];
  shipped.alerting.alertmanagers = [{ static_configs: [{ targets: [alertmanager] }] }];
  return { config: shipped as unknown as Record<string, unknown>, ruleFiles: Object.fromEntries(shipped.rule_files.map((f) => [f, rulesWithoutWaiting(f)])) };
}
