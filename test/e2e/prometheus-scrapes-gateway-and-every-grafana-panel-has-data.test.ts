/**
 * The shipped Grafana dashboard against the real thing: a real Prometheus on
 * the shipped config and rules scrapes a gateway in front of two sim-engines
 * (with simulated GPUs) while streamed and non-streamed traffic runs, and
 * every panel's every query must return series — not merely evaluate — except
 * the panels that only draw after a failure or with a fleet, each named below
 * with why. Every metric a panel names must also be one the gateway's own
 * scrape carries, so a renamed or unregistered metric empties no panel.
 */
import { afterAll, expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { REPO_ROOT, stopAll, waitUntil } from "../helpers/processes.ts";
import { type Daemon, freePort, promQuery, shippedPrometheusConfig, startPrometheus } from "../helpers/prometheus-stack.ts";
import { testWithTools } from "../helpers/system-tools.ts";

interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: { expr: string }[];
}
const dashboard = JSON.parse(readFileSync(join(REPO_ROOT, "deploy", "monitoring", "grafana-dashboard.json"), "utf8")) as { panels: Panel[] };

/** Panels with nothing to draw on a healthy gateway without a fleet, and why. */
const EMPTY_HERE: Record<string, string> = {
  "Upstream failures/s by reason": "no attempt fails",
  "Admission rejections/s": "nothing is turned away",
  "Capacity rejection ratio by band": "no capacity rejection to divide",
  "Faulted GPUs": "no GPU is faulted",
  "Nodes by state": "fleet only (the fleet e2e checks it)",
  "Replicas by state": "fleet only",
  "Models: desired vs serving": "fleet only",
  "Fabric ports active": "fleet only",
  "Autoscaler: asked, current and desired replicas": "fleet with an autoscaled model only",
  "Autoscaler decisions/s by reason": "fleet with an autoscaled model only",
};

/** Metric names in a PromQL expression (strings, label matchers and grouping clauses left out), recorded series included. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, "")
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, "");
  return [...bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)].map((m) => m[0]).filter((t) => t.startsWith("llmgw_") || t.includes(":"));
}

const daemons: Daemon[] = [];
afterAll(async () => {
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  await stopAll();
});

testWithTools(
  ["prometheus"],
  "every Grafana panel has data from a real Prometheus scraping a gateway under streamed and non-streamed traffic",
  async ([prometheusBin]) => {
    const simA = await startSim(["--model", "m", "--itl-ms", "5", "--gpus", "1", "--dcgm-port", "0"]);
    const simB = await startSim(["--host", "127.0.0.2", "--model", "m", "--itl-ms", "5", "--gpus", "1", "--dcgm-port", "0"]);
    const gw = await startGateway(
      {
        metrics_listen: "127.0.0.1:0",
        health: { poll_interval_ms: 200, stale_after_ms: 3000 },
        endpoints: [
          { id: "a", url: simA.api, dcgm_url: `${simA.dcgm}/metrics` },
          { id: "b", url: simB.api, dcgm_url: `${simB.dcgm}/metrics` },
        ],
      },
      2,
    );
    // No Alertmanager: nothing here needs an alert delivered.
    const { config, ruleFiles } = shippedPrometheusConfig(new URL(gw.urls.metrics!).host, `127.0.0.1:${freePort()}`);
    const prom = await startPrometheus(prometheusBin, config, ruleFiles);
    daemons.push(prom);
    const q = (expr: string) => promQuery(prom.url, expr);

    // Every metric a panel names is in the gateway's scrape (a recorded series is checked through its data below).
    const scrape = await (await fetch(`${gw.urls.metrics}/metrics`)).text();
    const exported = new Set([...scrape.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));
    const missing = dashboard.panels
      .flatMap((p) => (p.targets ?? []).flatMap((t) => metricNames(t.expr)))
      .filter((n) => !n.includes(":") && !exported.has(n.replace(/_(bucket|sum|count)$/, "")));
    // Fleet-only series are registered with a fleet; the deploy-monitoring unit test checks those against names.ts.
    const fleetOnly = new Set([
      "llmgw_nodes",
      "llmgw_replicas",
      "llmgw_model_replicas_desired",
      "llmgw_model_replicas_serving",
      "llmgw_fabric_port_active",
      "llmgw_autoscaler_asked_replicas",
      "llmgw_autoscaler_current_replicas",
      "llmgw_autoscaler_decisions_total",
    ]);
    expect(missing.filter((n) => !fleetOnly.has(n))).toEqual([]);

    // Traffic until the end of the test: streamed and not, several at once, so rates and quantiles have two scrapes of it.
    let stop = false;
    let sent = 0;
    const client = async (i: number) => {
      while (!stop) {
        const res = await fetch(`${gw.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", stream: i % 2 === 0, max_tokens: 12, messages: [{ role: "user", content: `hello ${i} ${sent}` }] }),
        });
        expect(res.status).toBe(200);
        await res.text();
        sent++;
      }
    };
    const clients = Array.from({ length: 6 }, (_, i) => client(i));

    try {
      const panels = dashboard.panels.filter((p) => p.type !== "row" && !(p.title in EMPTY_HERE));
      const pending = async () => {
        const empty: string[] = [];
        for (const p of panels) for (const t of p.targets ?? []) if ((await q(t.expr)).length === 0) empty.push(`${p.title}: ${t.expr}`);
        return empty;
      };
      let last: string[] = [];
      await waitUntil(
        async () => {
          last = await pending();
          return last.length === 0;
        },
        { what: "data in every panel", timeoutMs: 45_000, intervalMs: 1000 },
      ).catch(() => undefined);
      expect(last).toEqual([]);

      // The panels this dashboard adds for routing read what the engines report, per endpoint.
      const byEndpoint = async (expr: string) => Object.fromEntries((await q(expr)).map((s) => [s.metric.endpoint!, s.value]));
      const kv = await byEndpoint("llmgw_endpoint_kv_cache_usage_ratio");
      expect(Object.keys(kv).sort()).toEqual(["a", "b"]);
      for (const v of Object.values(kv)) expect(v >= 0 && v <= 1).toBe(true);
      expect(Object.keys(await byEndpoint("llmgw_endpoint_requests_running")).sort()).toEqual(["a", "b"]);
      expect(Object.keys(await byEndpoint("llmgw_endpoint_requests_waiting")).sort()).toEqual(["a", "b"]);
      // Quantiles in order and plausible: a 12-token answer at 5 ms a step takes well under a minute.
      const quantiles = async (metric: string) =>
        Promise.all([0.5, 0.9, 0.99].map(async (p) => (await q(`histogram_quantile(${p}, sum by (le) (rate(${metric}_bucket[5m])))`))[0]!.value));
      const e2e = await quantiles("llmgw_request_duration_seconds");
      expect(e2e[0]! <= e2e[1]! && e2e[1]! <= e2e[2]! && e2e[0]! > 0 && e2e[2]! < 60).toBe(true);
      const itl = await quantiles("llmgw_inter_token_seconds");
      expect(itl[0]! <= itl[2]! && itl[0]! > 0 && itl[2]! < 5).toBe(true);
      const versions = await q("count by (version, commit, bun) (llmgw_build_info)");
      expect(versions.map((s) => s.metric.bun)).toEqual([Bun.version]);

      // And the panels named empty here still evaluate.
      for (const p of dashboard.panels.filter((x) => x.title in EMPTY_HERE)) for (const t of p.targets ?? []) await q(t.expr);
      expect(sent).toBeGreaterThan(6);
    } finally {
      stop = true;
      await Promise.all(clients);
    }
  },
  120_000,
);
