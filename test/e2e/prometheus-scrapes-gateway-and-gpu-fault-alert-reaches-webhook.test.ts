/**
 * The monitoring path end to end, with the real programs: a real Prometheus
 * runs the shipped config, recording and alert rules (only the intervals and
 * `for:` shortened) against a gateway's metrics listener, in front of two
 * sim-engines with DCGM output on two "nodes" (127.0.0.1 and 127.0.0.2); a
 * real Alertmanager sends to a webhook on loopback. Prometheus' HTTP API must
 * show traffic, admission and GPU series with plausible values, no
 * utilisation series for the GPU that does not report it, every dashboard
 * query must evaluate, and an XID 79 on a simulated GPU must fire the
 * GPU-fault alert all the way to the webhook.
 */
import { afterAll, expect } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { REPO_ROOT, stopAll, waitUntil } from "../helpers/processes.ts";
import { type Daemon, promQuery, shippedPrometheusConfig, startAlertmanager, startPrometheus } from "../helpers/prometheus-stack.ts";
import { testWithTools } from "../helpers/system-tools.ts";

const MONITORING = join(REPO_ROOT, "deploy", "monitoring");
const daemons: Daemon[] = [];
afterAll(async () => {
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  await stopAll();
});

interface WebhookAlert {
  status: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

testWithTools(
  ["prometheus", "prometheus-alertmanager"],
  "Prometheus scrapes the gateway alone; GPU series are plausible; XID 79 fires the GPU-fault alert to the webhook",
  async ([prometheusBin, alertmanagerBin]) => {
    // Webhook receiver: Alertmanager posts {alerts: [...]} here.
    const received: WebhookAlert[] = [];
    const webhook = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        const body = (await req.json()) as { alerts: WebhookAlert[] };
        received.push(...body.alerts);
        return new Response("ok");
      },
    });

    try {
      const simA = await startSim(["--model", "m", "--itl-ms", "2", "--gpus", "2", "--dcgm-port", "0"]);
      const simB = await startSim(["--host", "127.0.0.2", "--model", "m", "--itl-ms", "2", "--gpus", "1", "--dcgm-port", "0"]);
      // GPU 1 of node A never reports utilisation, from the first scrape on.
      await simA.configure({ gpus: [{ index: 1, utilization_reported: false }] });
      const gw = await startGateway(
        {
          metrics_listen: "127.0.0.1:0",
          health: { poll_interval_ms: 200, stale_after_ms: 1500 },
          endpoints: [
            { id: "a", url: simA.api, dcgm_url: `${simA.dcgm}/metrics` },
            { id: "b", url: simB.api, dcgm_url: `${simB.dcgm}/metrics` },
          ],
        },
        2,
      );
      const metricsTarget = new URL(gw.urls.metrics!).host;

      const am = await startAlertmanager(alertmanagerBin, {
        route: { receiver: "hook", group_by: ["alertname"], group_wait: "0s", group_interval: "1s", repeat_interval: "1h" },
        receivers: [{ name: "hook", webhook_configs: [{ url: `http://127.0.0.1:${webhook.port}/`, send_resolved: false }] }],
      });
      daemons.push(am);

      // The shipped prometheus.yml and rules, with test intervals and loopback addresses.
      const { config, ruleFiles } = shippedPrometheusConfig(metricsTarget, new URL(am.url).host);
      const prom = await startPrometheus(prometheusBin, config, ruleFiles);
      daemons.push(prom);

      // Traffic: a few streamed and non-streamed requests.
      for (let i = 0; i < 6; i++) {
        const res = await fetch(`${gw.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: "m", stream: i % 2 === 0, max_tokens: 4, messages: [{ role: "user", content: `hello ${i}` }] }),
        });
        expect(res.status).toBe(200);
        await res.text();
      }

      const q = (expr: string) => promQuery(prom.url, expr);
      const one = async (expr: string) => {
        const r = await q(expr);
        return r.length === 1 ? r[0]!.value : undefined;
      };
      await waitUntil(async () => (await one('sum(llmgw_requests_total{outcome="ok"})')) === 6, {
        what: "6 ok requests in Prometheus",
        timeoutMs: 20_000,
        intervalMs: 250,
      });
      expect(await one('up{job="llmgw"}')).toBe(1);
      expect(await one("sum(llmgw_admission_grants_total)")).toBe(6);
      expect(await one("count(llmgw_admission_queue_depth)")).toBe(3);
      const saturation = await one('llmgw_pool_saturation{pool="default"}');
      expect(saturation).toBeGreaterThanOrEqual(0);
      expect(saturation).toBeLessThan(2);
      await waitUntil(async () => (await one("count(model_le:llmgw_time_to_first_token_seconds_bucket:rate5m)")) !== undefined, {
        what: "recording rules evaluated",
        timeoutMs: 10_000,
      });

      // GPUs: three, on two nodes, with plausible values.
      const healthy = await q("llmgw_gpu_healthy");
      expect(healthy.map((s) => `${s.metric.node}/${s.metric.gpu}=${s.value}`).sort()).toEqual(["127.0.0.1/0=1", "127.0.0.1/1=1", "127.0.0.2/0=1"]);
      expect(healthy.every((s) => s.metric.class === "h100-80g" && s.metric.uuid?.startsWith("GPU-"))).toBe(true);
      for (const s of await q("llmgw_gpu_memory_total_bytes")) expect(s.value).toBe(81559 * 1024 * 1024);
      for (const s of await q("gpu:llmgw_gpu_memory_used:ratio")) expect(s.value).toBeGreaterThan(0.2);
      for (const s of await q("llmgw_gpu_temperature_celsius")) expect(s.value).toBeGreaterThan(20);
      for (const s of await q("llmgw_gpu_power_watts")) expect(s.value).toBeGreaterThan(0);
      // The GPU that does not report utilisation has no series: not a flat 0.
      const util = await q("llmgw_gpu_utilization_ratio");
      expect(util.map((s) => `${s.metric.node}/${s.metric.gpu}`).sort()).toEqual(["127.0.0.1/0", "127.0.0.2/0"]);
      expect(util.every((s) => s.value >= 0 && s.value <= 1)).toBe(true);
      expect(await q("llmgw_gpu_fault")).toEqual([]);

      // Every dashboard query and every rule evaluates.
      const dashboard = JSON.parse(readFileSync(join(MONITORING, "grafana-dashboard.json"), "utf8")) as { panels: { targets?: { expr: string }[] }[] };
      for (const p of dashboard.panels) for (const t of p.targets ?? []) await q(t.expr);
      const rules = (await (await fetch(`${prom.url}/api/v1/rules`)).json()) as {
        data: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] };
      };
      const unhealthy = rules.data.groups.flatMap((g) => g.rules).filter((r) => r.health !== "ok" && r.health !== "unknown");
      expect(unhealthy).toEqual([]);

      // XID 79 on node B's GPU 0: the alert reaches the webhook.
      await simB.configure({ gpus: [{ index: 0, xid_errors: 79 }] });
      const alert = (await waitUntil(() => received.find((a) => a.labels.alertname === "LlmgwGpuFaulted" && a.status === "firing"), {
        what: "LlmgwGpuFaulted at the webhook",
        timeoutMs: 20_000,
        intervalMs: 200,
      }))!;
      expect(alert.labels).toMatchObject({ node: "127.0.0.2", gpu: "0", kind: "xid", class: "h100-80g", severity: "ticket", job: "llmgw" });
      expect(alert.annotations.summary).toBe("GPU 0 on 127.0.0.2 is out of rotation: xid fault");
      expect(alert.annotations.runbook).toContain("llmgw ctl nodes");
      expect(await one('llmgw_gpu_healthy{node="127.0.0.2"}')).toBe(0);
      // Only that GPU.
      expect(received.filter((a) => a.labels.alertname === "LlmgwGpuFaulted").every((a) => a.labels.node === "127.0.0.2")).toBe(true);
    } finally {
      void webhook.stop(true);
    }
  },
  90_000,
);
