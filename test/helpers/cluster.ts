/** A gateway and sim-engines as real processes on loopback, for integration and end-to-end tests. */
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { type Started, startLlmgw, waitUntil } from "./processes.ts";

export interface Sim extends Started {
  api: string;
  /** The DCGM exporter's base URL (with --gpus N --dcgm-port P). */
  dcgm: string | undefined;
  /** Its KV-event PUB and replay sockets (with --kv-events-config). */
  kvEvents: string | undefined;
  kvReplay: string | undefined;
  /** POST /sim/config */
  configure(patch: Record<string, unknown>): Promise<void>;
  state(): Promise<Record<string, unknown>>;
  metrics(): Promise<string>;
}

export async function startSim(args: string[]): Promise<Sim> {
  // A listening line each: api, then dcgm with a DCGM listener, kv-events (and kv-replay) with --kv-events-config.
  const kv = args.indexOf("--kv-events-config");
  const kvLines = kv < 0 ? 0 : (JSON.parse(args[kv + 1]!) as { replay_endpoint?: string }).replay_endpoint ? 2 : 1;
  const s = await startLlmgw(["sim-engine", "--port", "0", ...args], { waitFor: 1 + (args.includes("--dcgm-port") ? 1 : 0) + kvLines });
  const api = s.urls.api ?? s.url;
  return Object.assign(s, {
    api,
    dcgm: s.urls.dcgm,
    kvEvents: s.urls["kv-events"],
    kvReplay: s.urls["kv-replay"],
    async configure(patch: Record<string, unknown>) {
      const res = await fetch(`${api}/sim/config`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(patch) });
      if (!res.ok) throw new Error(`sim config ${res.status}: ${await res.text()}`);
    },
    async state() {
      return (await (await fetch(`${api}/sim/state`)).json()) as Record<string, unknown>;
    },
    async metrics() {
      return await (await fetch(`${api}/metrics`)).text();
    },
  });
}

export interface Gateway extends Started {
  api: string;
  admin: string;
  endpoints(): Promise<{ id: string; ready: boolean; circuit: string; inflight: number }[]>;
  metrics(): Promise<string>;
}

/** Start `llmgw serve` on a config object (listeners on port 0) and wait until `readyEndpoints` endpoints are ready. */
export async function startGateway(config: Record<string, unknown>, readyEndpoints = 0): Promise<Gateway> {
  // api and admin, plus the metrics listener when one is configured.
  const s = await startLlmgw(["serve", "--config", writeGatewayConfig(config)], { waitFor: config.metrics_listen ? 3 : 2 });
  const gw = Object.assign(s, {
    api: s.urls.api!,
    admin: s.urls.admin!,
    async endpoints() {
      const r = (await (await fetch(`${s.urls.admin}/admin/v1/endpoints`)).json()) as {
        endpoints: { id: string; ready: boolean; circuit: string; inflight: number }[];
      };
      return r.endpoints;
    },
    async metrics() {
      return await (await fetch(`${s.urls.admin}/metrics`)).text();
    },
  });
  if (readyEndpoints > 0) {
    await waitUntil(async () => (await gw.endpoints()).filter((e) => e.ready).length >= readyEndpoints, {
      what: `${readyEndpoints} ready endpoints`,
      timeoutMs: 15_000,
    });
  }
  return gw;
}

/** vLLM's --kv-events-config for a sim on loopback: PUB and replay sockets on free ports. */
export const SIM_KV_EVENTS = JSON.stringify({
  enable_kv_cache_events: true,
  publisher: "zmq",
  endpoint: "tcp://*:0",
  replay_endpoint: "tcp://*:0",
  topic: "kv",
});

/** Sum of a counter's samples whose labels include `match`, from /metrics text (0 when absent). */
export function counterValue(text: string, name: string, match: Record<string, string> = {}): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(name)) continue;
    const rest = line.slice(name.length);
    if (rest[0] !== "{" && rest[0] !== " ") continue;
    if (!Object.entries(match).every(([k, v]) => rest.includes(`${k}="${v}"`))) continue;
    total += Number(line.slice(line.lastIndexOf(" ") + 1));
  }
  return total;
}

/** Read a whole SSE response into its data payloads (strings, including "[DONE]"). */
export async function readSse(res: Response): Promise<string[]> {
  const text = await res.text();
  return text
    .split("\n\n")
    .map((e) => e.trim())
    .filter((e) => e.startsWith("data:"))
    .map((e) => e.slice(5).trim());
}

/** The gateway's audit line (`"msg":"audit"`) of one request, parsed, once its buffered log has been written. */
export async function auditLine(gw: Started, requestId: string): Promise<Record<string, unknown>> {
  const line = await waitUntil(
    () =>
      gw
        .output()
        .split("\n")
        .find((l) => l.includes('"msg":"audit"') && l.includes(`"request_id":"${requestId}"`)),
    { what: `the audit line of ${requestId}` },
  );
  return JSON.parse(line) as Record<string, unknown>;
}
