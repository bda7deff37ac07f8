/**
 * The fleet half of the monitoring path, end to end with the real programs:
 * a fleet gateway (no static endpoint) over two real agents — node-a with
 * InfiniBand adapters and a dcgm-exporter (a sim-engine's simulated H200s),
 * node-b with an old driver that reports no utilisation and no exporter — is
 * the one target of a real Prometheus running the shipped config and rules
 * (intervals and `for:` shortened), alerting through a real Alertmanager to a
 * webhook on loopback. The live scrape passes `promtool check metrics`;
 * Prometheus sees nodes by state, GPUs under their node names (utilisation
 * only where something reports it), fabric ports, replicas by state, models
 * desired vs serving (0 serving exported for a model nothing can place),
 * the autoscaler's decisions, and queue depth per band. SIGKILL of node-b's agent fires LlmgwNodeNotReporting
 * at the webhook, counts node-b as not_ready and drops its GPU series.
 */
import { afterAll, expect } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startSim } from "../helpers/cluster.ts";
import { capturedGpus, deleteAllReplicas, startAgent, type TestAgent } from "../helpers/fleet.ts";
import { agentState, fleetGatewayConfig, serving, startFleetGateway } from "../helpers/fleet-gateway.ts";
import { REPO_ROOT, stopAll, waitUntil } from "../helpers/processes.ts";
import { type Daemon, promQuery, shippedPrometheusConfig, startAlertmanager, startPrometheus } from "../helpers/prometheus-stack.ts";
import { runTool, testWithTools } from "../helpers/system-tools.ts";

const MODEL = "sim-llama";
const tmp = mkdtempSync(join(tmpdir(), "prom-fleet-e2e-"));
const daemons: Daemon[] = [];
const agents: TestAgent[] = [];
/** Engines of the agent killed with SIGKILL: nothing stops them but us. */
const orphanedEngines: number[] = [];

afterAll(async () => {
  await Promise.all(daemons.splice(0).map((d) => d.stop()));
  await Promise.all(agents.map((a) => deleteAllReplicas(a)));
  for (const pid of orphanedEngines) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

interface WebhookAlert {
  status: string;
  labels: Record<string, string>;
}

async function startStack(prometheusBin: string, alertmanagerBin: string, target: string, webhookPort: number): Promise<Daemon> {
  const am = await startAlertmanager(alertmanagerBin, {
    route: { receiver: "hook", group_by: ["alertname", "node"], group_wait: "0s", group_interval: "1s", repeat_interval: "1h" },
    receivers: [{ name: "hook", webhook_configs: [{ url: `http://127.0.0.1:${webhookPort}/`, send_resolved: false }] }],
  });
  daemons.push(am);
  const { config, ruleFiles } = shippedPrometheusConfig(target, new URL(am.url).host);
  const prom = await startPrometheus(prometheusBin, config, ruleFiles);
  daemons.push(prom);
  return prom;
}

testWithTools(
  ["prometheus", "prometheus-alertmanager", "promtool"],
  "Prometheus sees the fleet through the gateway alone; an agent SIGKILL fires LlmgwNodeNotReporting to the webhook",
  async ([prometheusBin, alertmanagerBin, promtool]) => {
    const received: WebhookAlert[] = [];
    const webhook = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (req) => {
        received.push(...((await req.json()) as { alerts: WebhookAlert[] }).alerts);
        return new Response("ok");
      },
    });
    try {
      const [a, b, exporter] = await Promise.all([
        startAgent("node-a", join(tmp, "a"), capturedGpus("h200", 2, "aa"), [], { infiniband: true }),
        startAgent("node-b", join(tmp, "b"), capturedGpus("h100", 2, "bb"), [], { unknownNvidiaSmiFields: ["utilization.gpu"] }),
        startSim(["--model", "exporter-only", "--gpus", "2", "--gpu-model", "NVIDIA H200", "--dcgm-port", "0"]),
      ]);
      agents.push(a, b);
      const config = fleetGatewayConfig(join(tmp, "data"), [a, b], {
        models: [
          // Autoscaled within fixed bounds (2..2): its decisions fill the autoscaler panels, its count stays put.
          {
            name: MODEL,
            engine: "sim",
            replicas: 2,
            autoscaling: { min_replicas: 2, max_replicas: 2, slo: { ttft_ms: 2000, itl_ms: 200 }, interval_ms: 500 },
          },
          // Needs four GPUs of one node: nothing can place it.
          { name: "too-big", engine: "sim", replicas: 1, tensor_parallel: 4 },
        ],
      });
      config.metrics_listen = "127.0.0.1:0";
      (config.nodes as Record<string, unknown>[])[0]!.dcgm_url = `${exporter.dcgm}/metrics`;
      const gw: Gateway = await startFleetGateway(config);
      await waitUntil(async () => (await serving(gw, MODEL)).length === 2, { timeoutMs: 40_000, what: "2 replicas in rotation" });

      // The whole live scrape, fleet series included, passes promtool on both listeners.
      for (const url of [gw.urls.metrics!, gw.admin]) {
        const r = await runTool(promtool, ["check", "metrics"], await (await fetch(`${url}/metrics`)).text());
        expect({ url, out: r.out.trim(), code: r.code }).toEqual({ url, out: "", code: 0 });
      }

      const prom = await startStack(prometheusBin, alertmanagerBin, new URL(gw.urls.metrics!).host, webhook.port!);
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`${gw.api}/v1/chat/completions`, {
          method: "POST",
          body: JSON.stringify({ model: MODEL, stream: true, max_tokens: 4, messages: [{ role: "user", content: `hi ${i}` }] }),
        });
        expect(res.status).toBe(200);
        await res.text();
      }
      const q = (expr: string) => promQuery(prom.url, expr);
      const byLabel = async (expr: string, label: string) => Object.fromEntries((await q(expr)).map((s) => [s.metric[label] ?? "", s.value]));
      await waitUntil(async () => (await q('sum(llmgw_requests_total{outcome="ok"})'))[0]?.value === 4, {
        what: "4 ok requests in Prometheus",
        timeoutMs: 20_000,
        intervalMs: 250,
      });

      expect(await byLabel("llmgw_nodes", "state")).toEqual({ ready: 2, not_ready: 0, cordoned: 0, draining: 0 });
      expect(await byLabel("llmgw_node_ready", "node")).toEqual({ "node-a": 1, "node-b": 1 });
      expect(await byLabel(`llmgw_replicas{model="${MODEL}"} > 0`, "state")).toEqual({ ready: 2 });
      expect(await byLabel("llmgw_model_replicas_desired", "model")).toEqual({ [MODEL]: 2, "too-big": 1 });
      expect(await byLabel("llmgw_model_replicas_serving", "model")).toEqual({ [MODEL]: 2, "too-big": 0 });
      expect(await byLabel('llmgw_pool_queue_depth{pool="default"}', "band")).toEqual({ interactive: 0, standard: 0, batch: 0 });

      // GPUs under their node names and classes from the agents' inventories.
      const healthy = await q("llmgw_gpu_healthy");
      expect(healthy.map((s) => `${s.metric.node}/${s.metric.gpu}/${s.metric.class}=${s.value}`).sort()).toEqual([
        "node-a/0/h200-140g=1",
        "node-a/1/h200-140g=1",
        "node-b/0/h100-80g=1",
        "node-b/1/h100-80g=1",
      ]);
      for (const s of await q("llmgw_gpu_memory_total_bytes")) expect(s.value).toBe((s.metric.node === "node-a" ? 143771 : 81559) * 1024 * 1024);
      // Utilisation and temperature only where something reports them: node-b's old driver does not, and it has no exporter.
      expect((await q("llmgw_gpu_utilization_ratio")).map((s) => s.metric.node).sort()).toEqual(["node-a", "node-a"]);
      expect((await q("llmgw_gpu_temperature_celsius")).map((s) => s.metric.node).sort()).toEqual(["node-a", "node-a"]);
      // Fabric: node-a's four InfiniBand ports, rates in bytes per second.
      const rates = await q("llmgw_fabric_port_rate_bytes_per_second");
      expect(rates.map((s) => `${s.metric.node}/${s.metric.adapter}/${s.metric.port}=${s.value}`).sort()).toEqual([
        "node-a/hfi1_0/1=12500000000",
        "node-a/mlx4_0/1=5000000000",
        "node-a/mlx4_0/2=5000000000",
        "node-a/mlx5_0/1=3125000000",
      ]);
      expect((await q("sum(llmgw_fabric_port_active)"))[0]?.value).toBe(4);
      // The Grafana dashboard's fleet panels have data here (a query that only evaluates would prove less).
      const grafana = JSON.parse(readFileSync(join(REPO_ROOT, "deploy", "monitoring", "grafana-dashboard.json"), "utf8")) as {
        panels: { title: string; targets?: { expr: string }[] }[];
      };
      const fleetPanels = [
        "Nodes by state",
        "Replicas by state",
        "Models: desired vs serving",
        "Fabric ports active",
        "Queue depth by pool and band",
        "GPUs healthy / faulted",
        "Autoscaler: asked, current and desired replicas",
        "Autoscaler decisions/s by reason",
      ];
      // A rate needs two scrapes of a change: each query is given a few scrapes to show series.
      for (const p of grafana.panels.filter((x) => fleetPanels.includes(x.title))) {
        for (const t of p.targets ?? [])
          if (!t.expr.includes("== 0")) {
            const series = await waitUntil(async () => ((await q(t.expr)).length > 0 ? true : null), { timeoutMs: 10_000, what: t.expr }).catch(() => false);
            expect({ panel: p.title, expr: t.expr, series }).toEqual({ panel: p.title, expr: t.expr, series: true });
          }
      }

      // node-b's agent is killed: its engines stay (a restarted agent adopts them); the test stops them at the end.
      for (const r of (await agentState(b)).replicas) if (r.pid !== null) orphanedEngines.push(r.pid);
      await b.child.stop("SIGKILL");
      const alert = (await waitUntil(() => received.find((x) => x.labels.alertname === "LlmgwNodeNotReporting" && x.status === "firing"), {
        what: "LlmgwNodeNotReporting at the webhook",
        timeoutMs: 20_000,
        intervalMs: 200,
      }))!;
      expect(alert.labels).toMatchObject({ node: "node-b", severity: "page", job: "llmgw" });
      expect(await byLabel("llmgw_nodes", "state")).toMatchObject({ ready: 1, not_ready: 1 });
      expect(await byLabel("llmgw_node_ready", "node")).toEqual({ "node-a": 1, "node-b": 0 });
      // Its GPUs have no series now: not the last figures it sent.
      await waitUntil(async () => (await q('llmgw_gpu_healthy{node="node-b"}')).length === 0, { what: "node-b's GPU series dropped", timeoutMs: 5_000 });
      expect((await q("llmgw_gpu_healthy")).map((s) => s.metric.node)).toEqual(["node-a", "node-a"]);
      expect(received.filter((x) => x.labels.alertname === "LlmgwNodeNotReporting").every((x) => x.labels.node === "node-b")).toBe(true);
    } finally {
      void webhook.stop(true);
    }
  },
  120_000,
);
