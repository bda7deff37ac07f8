/**
 * The parts buildDataPlane (data-plane.ts) assembles a gateway from, each a
 * function of what the earlier ones made: the shared-memory tables, the
 * endpoint registry with its circuit breakers, the workers over the tables,
 * and the batch services (jobs, response cache, their metrics). Nothing here
 * starts a listener.
 */

import { EndpointChooser } from "../admission/chooser.ts";
import { type DecisionRecorder, decisionRecorderFromEnv } from "../admission/decision-record.ts";
import { EndpointDirectory } from "../admission/endpoint-directory.ts";
import { ResponseCache } from "../cache/response-cache-store.ts";
import type { Config } from "../config/types.ts";
import type { AdapterCatalog } from "../gateway/adapter-catalog.ts";
import { AdmissionClient } from "../gateway/admission-client.ts";
import { CircuitBreakers, type CircuitStateName, type ProbeSender } from "../gateway/circuit-breaker.ts";
import { sendProbe } from "../gateway/circuit-probe.ts";
import type { GatewayContext } from "../gateway/context.ts";
import { DialGuard } from "../gateway/dial-guard.ts";
import { EndpointRegistry, MAX_POOLS } from "../gateway/endpoints.ts";
import type { ModelCatalog } from "../gateway/model-catalog.ts";
import type { BackgroundSend } from "../jobs/background-responses.ts";
import type { SendLine } from "../jobs/batch-runner.ts";
import { GatewayJobs } from "../jobs/jobs-service.ts";
import { GatewayResponses } from "../jobs/responses-service.ts";
import { JobsMetrics } from "../metrics/jobs-metrics.ts";
import type { GatewayMetrics } from "../metrics/registry.ts";
import type { PolledEndpoint } from "../protocol/health-messages.ts";
import type { EndpointDescriptor } from "../protocol/scheduler-messages.ts";
import { KvBlockIndex } from "../scheduling/kv-block-index.ts";
import { PrefixIndex } from "../scheduling/prefix-index.ts";
import { SchedulingProfile } from "../scheduling/profile.ts";
import { AdmissionStatsTable, EndpointTable, I, PoolTable, Signals } from "../shared/endpoint-table.ts";
import { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import { KvEventStats } from "../shared/kv-event-stats.ts";
import type { Logger } from "../shared/logger.ts";
import { LoraTable } from "../shared/lora-table.ts";
import { PoolShareTable } from "../shared/pool-shares.ts";
import type { StateBackend } from "../shared-state/state-backend.ts";
import { backgroundSend } from "./background-send.ts";
import { batchLineSend } from "./batch-line-send.ts";
import { HealthClient, type HealthEvents } from "./health-client.ts";
import { KvEventsClient } from "./kv-events-client.ts";
import { Late } from "./late.ts";
import type { LiveContext } from "./live-context.ts";

/** What the main thread, the scheduler worker and the health worker all read and write. */
export interface SharedTables {
  table: EndpointTable;
  pools: PoolTable;
  stats: AdmissionStatsTable;
  signals: Signals;
  /** Per pool, until when its GPUs are saturated (the health worker writes it with a gpu_health block; all 0 without). */
  gpuSaturation: GpuSaturationTable;
  prefixIndex: PrefixIndex;
  /** Per endpoint slot, its KV-event stream's state and counts (the KV-events worker writes it). */
  kvStats: KvEventStats;
  /** What the engines' KV-cache events say they hold (the KV-events worker writes it; both choosers read it). */
  kvIndex: KvBlockIndex;
  /** Each pool's share of the cluster's demand (state.backend: redis; unused otherwise). */
  shares: PoolShareTable;
  /** LoRA adapters per endpoint (the health worker writes, both choosers read). */
  lora: LoraTable;
}

export function sharedTables(config: Config): SharedTables {
  const kvStats = new KvEventStats(config.maxEndpoints);
  return {
    kvStats,
    // Sized to its ceiling now (other threads hold views); pages nobody writes are never touched.
    kvIndex: new KvBlockIndex(config.kvEvents.indexBlocks, kvStats),
    table: new EndpointTable(config.maxEndpoints),
    pools: new PoolTable(MAX_POOLS, config.admission.bands.length),
    stats: new AdmissionStatsTable(config.admission.bands.length, MAX_POOLS),
    signals: new Signals(),
    gpuSaturation: new GpuSaturationTable(MAX_POOLS),
    prefixIndex: new PrefixIndex(config.scheduling.prefixAffinity.lruEntries),
    shares: new PoolShareTable(MAX_POOLS),
    lora: new LoraTable(config.maxEndpoints),
  };
}

/**
 * The registry of the configured endpoints, and its circuit breakers. Each
 * transition is logged, and counted in `metrics` once it is bound (the
 * breakers exist before the metrics do: the metrics read the registry; no
 * breaker moves before a request or a probe, so in practice every
 * transition is counted). The breakers name endpoints through the registry
 * built after them (the registry resets a slot's breakers): `endpoints`
 * below is bound before this returns.
 */
export function openRegistry(
  config: Config,
  t: SharedTables,
  catalog: ModelCatalog,
  log: Logger,
  metrics: Late<GatewayMetrics>,
): { registry: EndpointRegistry; breakers: CircuitBreakers } {
  const endpoints = new Late<EndpointRegistry>("endpoint registry");
  const registry = () => endpoints.get();
  const modelOf = (index: number, field: number) => registry().descriptor(index)?.models[field - I.MODEL_CIRCUITS];
  const onTransition = (index: number, field: number, state: CircuitStateName) => {
    const id = registry().idOf(index) ?? String(index);
    if (field === I.CIRCUIT) {
      metrics.peek()?.circuitTransitions.inc({ endpoint: id, state });
      log.warn({ endpoint: id, state }, "circuit breaker");
      return;
    }
    const model = modelOf(index, field) ?? "unknown";
    metrics.peek()?.modelCircuitTransitions.inc({ endpoint: id, model, state });
    log.warn({ endpoint: id, model, state }, "model circuit breaker");
  };
  // Probes run here, on the main thread, beside the breakers they feed: the
  // breakers own the circuit fields and their timers (one writer per field),
  // and a probe is a single small fetch every interval per open circuit.
  let probes = 0;
  const probe: ProbeSender = async (index, field, target) => {
    // A removed endpoint (its slot still retiring) is not probed any more.
    const url = registry().specOf(index)?.url;
    if (url === undefined) return { ok: false, gone: true };
    // A model circuit probes its own model; the endpoint's probes the model whose request failed there.
    const model = field === I.CIRCUIT ? target.model : (modelOf(index, field) ?? target.model);
    const verdict = await sendProbe(
      url,
      { route: target.route, model },
      config.circuitBreaker.probe.timeoutMs,
      `llmgw-probe-${++probes}`,
      registry().upstreamHeadersOf(index),
    );
    const id = registry().idOf(index) ?? String(index);
    metrics.peek()?.circuitProbes.inc({ endpoint: id, result: verdict.ok ? "ok" : "failed" });
    log.debug({ endpoint: id, model, route: target.route, ok: verdict.ok }, "circuit probe");
    return verdict;
  };
  const breakers = new CircuitBreakers(t.table, config.circuitBreaker, onTransition, probe);
  const built = endpoints.bind(new EndpointRegistry(t.table, catalog, new DialGuard(config.maxEndpoints), breakers));
  for (const e of config.endpoints) built.add(e);
  return { registry: built, breakers };
}

export interface Workers {
  admission: AdmissionClient;
  health: HealthClient;
  /**
   * The KV-events worker's client (the worker starts with the first endpoint
   * that publishes events); absent when the profile reads no KV blocks, and
   * then no endpoint's events are followed.
   */
  kvEvents: KvEventsClient | undefined;
  /** Which endpoint serves which model (the main thread's copy). */
  directory: EndpointDirectory;
}

/**
 * The scheduler and health workers over the shared tables, told about the
 * endpoints the registry holds now; the registry tells them of every later
 * change. With `followKvEvents`, the client of the KV-events worker too,
 * which follows every endpoint that publishes events. Resolves once the
 * scheduler and health workers have answered their init.
 */
export async function startWorkers(
  config: Config,
  t: SharedTables,
  registry: EndpointRegistry,
  opts: {
    breakers: CircuitBreakers;
    clustered: boolean;
    /** Follow the engines' KV-cache events (the profile reads KV blocks). */
    followKvEvents: boolean;
    events: HealthEvents;
    log: Logger;
    adapters?: AdapterCatalog;
  },
): Promise<Workers> {
  const slots = registry.active().map((e) => e.index);
  const directory = new EndpointDirectory(slots.map((i) => registry.descriptor(i)).filter((d): d is EndpointDescriptor => d !== undefined));
  const chooser = new EndpointChooser(
    t.table,
    directory,
    new SchedulingProfile(config.scheduling, undefined, t.prefixIndex, t.kvIndex),
    config.health.staleAfterMs,
    t.lora,
    recorderFor("main"),
  );
  const admission = new AdmissionClient(
    {
      endpoints: t.table.buffer,
      pools: t.pools.buffer,
      stats: t.stats.buffer,
      signals: t.signals.buffer,
      prefixIndex: t.prefixIndex.buffer,
      kvIndex: t.kvIndex.buffer,
      kvIndexCapacity: t.kvIndex.capacity,
      kvStats: t.kvStats.buffer,
      lora: t.lora.buffer,
      shares: opts.clustered ? t.shares.buffer : undefined,
      maxEndpoints: config.maxEndpoints,
      maxPools: MAX_POOLS,
      directory: directory.all(),
      scheduling: config.scheduling,
      admission: config.admission,
      staleAfterMs: config.health.staleAfterMs,
    },
    t.table,
    t.pools,
    directory,
    chooser,
    config.admission,
    // A grant for a request whose client already left (its claim is already returned): free the probe slot.
    (index, probe) => opts.breakers.abandon(index, probe),
    opts.adapters,
  );
  const health = new HealthClient(
    {
      buffer: t.table.buffer,
      maxEndpoints: config.maxEndpoints,
      signals: t.signals.buffer,
      endpoints: slots.map((i) => registry.polled(i)).filter((e): e is PolledEndpoint => e !== undefined),
      health: config.health,
      gpuHealth: config.gpuHealth,
      gpuSaturation: t.gpuSaturation.buffer,
      lora: t.lora.buffer,
    },
    opts.events,
    opts.log,
  );
  const kvEvents = opts.followKvEvents ? new KvEventsClient({ index: t.kvIndex, stats: t.kvStats }, config.kvEvents, opts.log) : undefined;
  registry.attach({
    setEndpoint: (index, d) => admission.setEndpoint(index, d),
    setModels: (index, models) => admission.setModels(index, models),
    pollEndpoint: (index, e) => health.pollEndpoint(index, e),
    followKvEvents: (index, id, source) => kvEvents?.follow(index, id, source),
  });
  // The endpoints present before the listeners were attached (the config's).
  if (kvEvents) for (const e of registry.active()) if (e.spec.kvEvents) kvEvents.follow(e.index, e.id, e.spec.kvEvents);
  await Promise.all([admission.whenReady(), health.whenReady()]);
  return { admission, health, kvEvents, directory };
}

export interface BatchServices {
  jobs: GatewayJobs;
  responses: GatewayResponses;
  cache: ResponseCache;
  jobsMetrics: JobsMetrics;
}

/**
 * Batch jobs, background responses, idempotency records, the response
 * cache, and the metrics of all these plus GPU shedding. Batch lines and
 * background responses run through the gateway's own request path, whose
 * context holds these services: `requestPath` is read when the first one is
 * sent, after the assembly has bound it.
 */
export function openBatchServices(
  config: Config,
  deps: {
    log: Logger;
    state: StateBackend;
    catalog: ModelCatalog;
    registry: EndpointRegistry;
    admission: AdmissionClient;
    gpuSaturation: GpuSaturationTable;
    metrics: GatewayMetrics;
    requestPath: Late<LiveContext>;
    /** Resolves once every endpoint was polled once (and a fleet settled): batch lines wait for it. */
    discovered: () => Promise<void>;
  },
): BatchServices {
  const { registry } = deps;
  const poolSaturated = (name: string) => {
    const row = registry.pools().find((p) => p.name === name)?.index;
    return row !== undefined && deps.gpuSaturation.saturated(row, Date.now());
  };
  // A batch line or background response takes the request path's context current when it is sent (a reload swaps it), as a client's request does.
  let send: { ctx: GatewayContext; fn: SendLine } | undefined;
  const sendLine: SendLine = (line, signal, meta) => {
    const ctx = deps.requestPath.get().current;
    if (send?.ctx !== ctx) send = { ctx, fn: batchLineSend(ctx) };
    return send.fn(line, signal, meta);
  };
  const jobs = new GatewayJobs({
    config,
    log: deps.log,
    send: sendLine,
    saturated: poolSaturated,
    poolOf: (model) => {
      const row = deps.admission.poolOf(deps.catalog.resolve(model) ?? model);
      return (row === undefined ? undefined : registry.poolName(row)) ?? "default";
    },
    knownModel: (name) => deps.catalog.resolve(name) !== undefined,
    discovered: deps.discovered,
    shared: deps.state.shared,
  });
  let sendBackground: { ctx: GatewayContext; fn: BackgroundSend } | undefined;
  const responses = new GatewayResponses({
    config,
    log: deps.log,
    send: (req, target, signal) => {
      const ctx = deps.requestPath.get().current;
      if (sendBackground?.ctx !== ctx) sendBackground = { ctx, fn: backgroundSend(ctx) };
      return sendBackground.fn(req, target, signal);
    },
    ...(deps.state.shared === undefined ? {} : { shared: deps.state.shared.responses }),
  });
  const cache = new ResponseCache(config.responseCache, deps.state.shared?.responseCache);
  const jobsMetrics = new JobsMetrics(deps.metrics.registry, {
    pools: () => registry.pools().map((p) => p.name),
    ...(config.gpuHealth === null ? {} : { poolSaturated }),
    batchLineStats: () => jobs.lineStats(),
    batchLineWaits: () => jobs.waitStats(),
    jobsStoreAvailable: () => jobs.available,
    uploadBytesHeld: () => jobs.uploadBytesHeld(),
    ...(cache.off ? {} : { cacheStats: () => cache.stats() }),
    idempotentReplays: () => jobs.replays(),
  });
  return { jobs, responses, cache, jobsMetrics };
}

/** The decision recorder of a thread, when LLMGW_RECORD_DECISIONS names a file. */
function recorderFor(thread: string): { thread: string; to: DecisionRecorder } | undefined {
  const to = decisionRecorderFromEnv();
  return to ? { thread, to } : undefined;
}
