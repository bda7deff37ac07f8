/** A gateway's data plane built in process from fakes — engines answered by a function, admission by a list of endpoints — and driven like Hono's app.request(): no ports, no workers. */
import { QuotaLimiter } from "../../src/admission/tenant-quota.ts";
import { ResponseCache } from "../../src/cache/response-cache-store.ts";
import { buildConfig } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { AdapterCatalog } from "../../src/gateway/adapter-catalog.ts";
import { type AdmitRequest, type Grant, SchedulerRejection } from "../../src/gateway/admission-client.ts";
import { Authenticator } from "../../src/gateway/api-keys.ts";
import { ContinuationPolicy } from "../../src/gateway/continuation-policy.ts";
import type { EndpointRegistry } from "../../src/gateway/endpoints.ts";
import { ModelCatalog } from "../../src/gateway/model-catalog.ts";
import { NO_TOKENIZE_TARGET, PromptTokenizer } from "../../src/gateway/prompt-tokens.ts";
import { RetryBudget } from "../../src/gateway/retry-budget.ts";
import { RouteSupport } from "../../src/gateway/route-support.ts";
import { createFetchHandler, type DataPlaneDeps } from "../../src/gateway/server.ts";
import { StreamEvictions } from "../../src/gateway/stream-evictions.ts";
import type { IdempotencyCheck, IdempotencyGate } from "../../src/jobs/idempotency-gate.ts";
import type { OpenJobs } from "../../src/jobs/jobs-service.ts";
import { JobsMetrics } from "../../src/metrics/jobs-metrics.ts";
import { registerKvEventsMetrics } from "../../src/metrics/kv-events-metrics.ts";
import { GatewayMetrics } from "../../src/metrics/registry.ts";
import { EndpointTable } from "../../src/shared/endpoint-table.ts";
import { GpuSaturationTable } from "../../src/shared/gpu-saturation-table.ts";
import { KvEventStats } from "../../src/shared/kv-event-stats.ts";
import { logger } from "../../src/shared/logger.ts";
import type { UploadBudget } from "../../src/shared/upload-budget.ts";

export const API_KEY = "sk-in-process-0123456789";
export const TENANT = "acme";
/** A key whose requests run in the batch band (the one a saturated pool sheds). */
export const BATCH_KEY = "sk-in-process-batch-9876543";

/** An engine: answers the request sent to the endpoint (its id) as a function of the body. */
export type FakeEngine = (endpoint: string, path: string, body: Record<string, unknown>) => Response | Promise<Response>;

/** What happened, in order: each gate or step that ran, each engine call. */
export interface Trace {
  steps: string[];
  /** Engine calls: endpoint id and the model the body asked for. */
  calls: { endpoint: string; model: string }[];
  /** Each grant's prefill load (100 tokens a grant) as it comes off: "first token" or "release", with the tokens taken off. */
  prefill: string[];
}

export interface InProcessOptions {
  /** Merged into the base config (auth on with API_KEY for TENANT, model "m" on e1 and e2). */
  config?: Record<string, unknown>;
  engine?: FakeEngine;
  /** Endpoint ids per model, in the order admission hands them out; default m: [e1, e2]. */
  endpoints?: Record<string, string[]>;
  /** What the idempotency store says of a request that sent an Idempotency-Key (default: nothing recorded). */
  idempotency?: (req: Request) => IdempotencyCheck;
  /** Whether the pool's GPUs are saturated (the shed gate's input; default false). */
  saturated?: boolean;
  /**
   * A fleet that loads declared LoRA adapters on demand: the adapters it
   * declares, how long a request waits for one, and what the fleet does when
   * asked (e.g. list it on an endpoint through the catalog it is given).
   */
  fleet?: { declared: { name: string; base: string }[]; waitMs: number; onRequested(adapter: string, catalog: AdapterCatalog): void };
}

export interface InProcessGateway {
  /** Like Hono's app.request(): a path (or Request) in, the gateway's Response out. */
  request(path: string, init?: RequestInit): Promise<Response>;
  /** What the data plane was built from: each stage takes its part of it. */
  deps: DataPlaneDeps;
  config: Config;
  trace: Trace;
  /** The value of a counter (or 0 where the series does not exist). */
  counter(name: string, labels: Record<string, string>): Promise<number>;
}

export function okChat(model: string): Response {
  return Response.json({
    id: "c1",
    object: "chat.completion",
    model,
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
  });
}

export function chatBody(model = "m", extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model, messages: [{ role: "user", content: "hello" }], ...extra });
}

/** A fake of T with only the members given: any other use fails the test, naming it. */
function partial<T extends object>(name: string, members: Partial<T> = {}): T {
  return new Proxy(members as T, {
    get(target, prop) {
      if (prop in target) return target[prop as keyof T];
      if (prop === "then") return undefined; // not a promise
      throw new Error(`the in-process gateway has no ${name}.${String(prop)}`);
    },
  });
}

export function inProcessGateway(opts: InProcessOptions = {}): InProcessGateway {
  const config = buildConfig({
    auth: {
      enabled: true,
      keys: [
        { key: API_KEY, tenant: TENANT },
        { key: BATCH_KEY, tenant: TENANT, max_band: "batch" },
      ],
    },
    gpu_health: { sources: [], shed_batch: true, shed_band: "batch" },
    tenants: [{ name: TENANT }],
    models: [{ name: "m", aliases: [], fallback: [] }],
    retry: { backoff_ms: 1 },
    ...opts.config,
  });
  const trace: Trace = { steps: [], calls: [], prefill: [] };
  const byModel = opts.endpoints ?? { m: ["e1", "e2"] };
  const ids: string[] = [];
  for (const list of Object.values(byModel)) for (const id of list) if (!ids.includes(id)) ids.push(id);
  const engine = opts.engine ?? ((_e: string, _p: string, body: Record<string, unknown>) => okChat(String(body.model)));
  const table = new EndpointTable(8);
  const metrics = new GatewayMetrics(table, () => ids.map((id, index) => ({ index, id })), {
    defaultMetrics: false,
    bandNames: config.admission.bands.map((b) => b.name),
  });
  const log = logger().child({});
  log.level = "silent";

  /** Admission: the model's endpoints in order, less those excluded; none left is NO_READY_ENDPOINT. */
  const pick = (model: string, exclude: ReadonlySet<number>): Grant => {
    const index = (byModel[model] ?? []).map((id) => ids.indexOf(id)).find((i) => !exclude.has(i));
    if (index === undefined) throw new SchedulerRejection("NO_READY_ENDPOINT", `no ready endpoint serves model '${model}'`, 0, undefined);
    return { index, pool: 0, circuit: -1, probe: -1, waitedMs: 0, path: "fast", scores: {}, drops: {}, candidates: 1, prefillTokens: 100 };
  };
  const admission = {
    admit(req: AdmitRequest): Grant {
      trace.steps.push("admission");
      return pick(req.model, new Set());
    },
    reschedule: (model: string, _band: number, _keys: unknown, exclude: ReadonlySet<number>) => pick(model, exclude),
    release(g: Grant) {
      trace.prefill.push(`release ${g.prefillTokens}`);
      g.prefillTokens = 0;
    },
    prefillDone(g: Grant) {
      trace.prefill.push(`first token ${g.prefillTokens}`);
      g.prefillTokens = 0;
    },
    poolOf: () => 0,
  };
  const breakers = { success() {}, attemptEnded() {}, abandon() {} };
  const endpoints = {
    idOf: (i: number) => ids[i],
    urlOf: (i: number) => (ids[i] === undefined ? undefined : `http://${ids[i]}.invalid`),
    upstreamHeadersOf: () => ({}),
    poolName: () => "default",
    active: (): ReturnType<EndpointRegistry["active"]> => [],
    evictions: new StreamEvictions(),
  };
  const upstreamFetch = async (url: string, init: RequestInit): Promise<Response> => {
    const u = new URL(url);
    const endpoint = u.hostname.replace(/\.invalid$/, "");
    const body = JSON.parse(typeof init.body === "string" ? init.body : new TextDecoder().decode(init.body as Uint8Array)) as Record<string, unknown>;
    trace.steps.push("engine");
    trace.calls.push({ endpoint, model: String(body.model) });
    return engine(endpoint, u.pathname, body);
  };
  const step =
    <A extends unknown[], R>(name: string, fn: (...args: A) => R) =>
    (...args: A): R => {
      trace.steps.push(name);
      return fn(...args);
    };
  const auth = new Authenticator(config.auth, config.admission);
  auth.authenticate = step("auth", auth.authenticate.bind(auth));
  const adapters = new AdapterCatalog();
  if (opts.fleet) adapters.setDeclared(opts.fleet.declared);
  const fleet = opts.fleet;
  const adapterLoads = fleet && { waitMs: fleet.waitMs, requested: step("adapter-load", (adapter: string) => fleet.onRequested(adapter, adapters)) };
  const catalog = new ModelCatalog(config, adapters);
  // The parse step resolves the model once the body is read and parsed.
  catalog.resolve = step("body", catalog.resolve.bind(catalog));
  const quota = new QuotaLimiter(config.tenants);
  quota.admit = step("quota", quota.admit.bind(quota));
  const cache = new ResponseCache(config.responseCache);
  cache.check = step("cache", cache.check.bind(cache));
  const gpuSaturation = new GpuSaturationTable(4);
  gpuSaturation.saturated = step("shed", () => opts.saturated === true);
  const idempotency = partial<IdempotencyGate>("idempotency gate", {
    check: step("replay", async (req: Request) => opts.idempotency?.(req) ?? ({ kind: "none" } as const)),
  });
  const openJobs = partial<OpenJobs>("jobs service", { idempotency });
  const jobs = { opened: async () => openJobs, uploadBudget: partial<UploadBudget>("upload budget") };
  const kvMetrics = registerKvEventsMetrics(metrics.registry, new KvEventStats(8), () => []);
  const deps: DataPlaneDeps = {
    config,
    catalog,
    endpoints,
    admission,
    breakers,
    budget: new RetryBudget(config.retry.budgetRatio, config.retry.minPerS),
    dial: { isRecent: () => true, check: async () => {}, markOk() {} },
    upstreamFetch,
    metrics,
    log,
    usesPrefixHashes: false,
    promptTokens: new PromptTokenizer(config.kvEvents.tokenize, NO_TOKENIZE_TARGET, kvMetrics),
    auth,
    quota,
    continuation: new ContinuationPolicy(config.continuation),
    routes: new RouteSupport(config.endpoints),
    tenantLabel: (tenant: string) => tenant,
    jobs,
    responses: partial<DataPlaneDeps["responses"]>("responses service"),
    cache,
    gpuSaturation,
    jobsMetrics: new JobsMetrics(metrics.registry, { pools: () => ["default"] }),
    ...(adapterLoads ? { adapterLoads } : {}),
  };
  const handler = createFetchHandler(deps);
  return {
    deps,
    config,
    trace,
    request(path, init) {
      return handler(new Request(`http://gateway.invalid${path}`, init));
    },
    async counter(name, labels) {
      const metric = metrics.registry.getSingleMetric(name);
      if (metric === undefined) return 0;
      const { values } = await metric.get();
      const hit = values.find((v) => Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want));
      return hit?.value ?? 0;
    },
  };
}
