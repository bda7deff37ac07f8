/**
 * Every metric llmgw exports, with its labels, in one place. Label values come
 * from closed unions (outcomes, reasons) or from configuration (model names,
 * endpoint ids), never from free text a client typed.
 */
import type { RouteName } from "../config/plugin-names.ts";

/** How a request ended, as seen by the client. */
const OUTCOMES = [
  "ok",
  "client_error", // 4xx the client caused (bad JSON, unknown model, engine 4xx)
  "cancelled", // the client went away
  "no_endpoint", // nothing ready served the model
  "upstream_error", // every attempt failed before the first byte
  "stream_error", // the stream broke after the first byte
  "timeout", // a deadline fired (or the admission TTL)
  "rejected", // admission queue full, quota, or authentication
] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** Why an upstream attempt failed (the retry reason and the circuit-breaker input). */
const ATTEMPT_FAILURES = [
  "connect",
  "headers_timeout",
  "first_token_timeout",
  "status_5xx",
  "status_429",
  "status_4xx",
  "malformed",
  "truncated",
  "too_large",
  "idle_timeout",
  "total_timeout",
] as const;
export type AttemptFailure = (typeof ATTEMPT_FAILURES)[number];

/** Why admission (or a gate before it) turned a request away. */
const ADMISSION_REJECTIONS = ["queue_full", "ttl_expired", "cancelled", "rate_limited", "unauthorized"] as const;
export type AdmissionRejection = (typeof ADMISSION_REJECTIONS)[number];

/** Why the admin listener refused a request before any route ran (src/admin/request-guard.ts). */
export const ADMIN_REFUSALS = [
  "host", // a Host that is not the listener's (DNS rebinding): 421
  "origin", // a state-changing request from another origin: 403
  "media_type", // a state-changing request with a body that is not JSON (a form): 415
  "token", // a state-changing request without the admin token: 401
] as const;
export type AdminRefusal = (typeof ADMIN_REFUSALS)[number];

/**
 * Mid-stream continuation. Why a stream broke after its first
 * byte, for the breaks a continuation may mend (drained: the fleet took its
 * replica away past the drain's grace period).
 */
const BREAK_CAUSES = ["cut", "stall", "engine_error", "drained"] as const;
export type BreakCause = (typeof BREAK_CAUSES)[number];

/** How a break of a stream was handled: continued, or why it was not. */
const RECOVERY_RESULTS = [
  "recovered", // a continuation took over the stream
  "not_continuable", // the request cannot be continued exactly (tools, logprobs, n > 1 …)
  "not_resumable", // what was delivered cannot be continued exactly (tool-call or reasoning deltas, a finish_reason already out …)
  "limit", // continuation.max_recoveries reached
  "retry_budget", // the retry budget had nothing left
  "deadline", // the total deadline was spent
  "no_target", // no ready replica (or fallback) could take the continuation
  "cancelled", // the client left during the recovery
] as const;
export type RecoveryResult = (typeof RECOVERY_RESULTS)[number];

/** Tenant label for tenants that are not configured (keys may name any tenant). */
export const OTHER_TENANT = "other";

/** The API a request used (the `route` label): OpenAI's routes and the rest of vLLM's (paths in docs/gateway.md). */
export type Route = RouteName;

/** Model label for a request whose model is not configured or discovered. */
export const UNKNOWN_MODEL = "unknown";

/** How a batch line attempt ended, as the batch runner counts it. */
export const BATCH_LINE_OUTCOMES = ["completed", "failed", "retried", "waited"] as const;
export type BatchLineOutcome = (typeof BATCH_LINE_OUTCOMES)[number];

/**
 * Why batch lines were put back to run later (the `reason` of
 * llmgw_batch_line_waits_total, and the batch object's `llmgw.waiting_reason`):
 * GPU saturation, a rate limit, a full admission queue, no ready endpoint for
 * the model (not yet discovered, engine down or restarting), an engine
 * failing with a 5xx (retried with backoff), a full disk where results are kept.
 */
/** Why an answered Responses API response was not stored (llmgw_responses_not_stored_total's reason). */
const NOT_STORED_REASONS = ["storage_full", "store_error", "too_large", "unreachable_id"] as const;
export type NotStoredReason = (typeof NOT_STORED_REASONS)[number];

export const WAIT_REASONS = ["gpu_saturated", "rate_limited", "queue_full", "no_ready_endpoint", "engine_error", "storage_full"] as const;
export type WaitReason = (typeof WAIT_REASONS)[number];

export const CACHE_RESULTS = ["hit", "miss"] as const;

// ---- Fleet. Computed at scrape time from state the gateway holds;
// a value nobody reported has no series (absent is not zero).

/** Node states as the fleet registry reports them (the `state` label of llmgw_nodes). */
export const NODE_STATES = ["ready", "not_ready", "cordoned", "draining"] as const;
export type NodeState = (typeof NODE_STATES)[number];

/**
 * Replica states (the agent's Starting/Loading/Ready/Failed/Stopped, plus
 * draining: leaving rotation, and lost: its node stopped answering or its
 * agent no longer runs it, so the control plane replaces it).
 */
export const REPLICA_STATES = ["starting", "loading", "ready", "draining", "failed", "stopped", "lost"] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];

/**
 * Why an autoscaling decision is what it is (the `reason` label of
 * llmgw_autoscaler_decisions_total): the control law's ask — forecast,
 * prefill, idle, slo-breach, latency-high, latency-low, hold, no-data — a cold start
 * (a model at zero that requests reach), or what stabilization held it to.
 */
export const AUTOSCALE_REASONS = [
  "forecast",
  "prefill",
  "idle",
  "slo-breach",
  "latency-high",
  "latency-low",
  "hold",
  "no-data",
  "cold-start",
  "min-replicas",
  "max-replicas",
  "up-window",
  "down-window",
  "surge",
  "pacing",
  "no-gpus",
] as const;
export type AutoscaleReason = (typeof AUTOSCALE_REASONS)[number];

export { GPU_FAULT_KINDS, type GpuFaultKind } from "../protocol/gpu-report.ts";

/**
 * Labels of every per-GPU series: the node (for static endpoints the host of
 * their dcgm_url; the fleet supplies node names), the index on the node, the
 * UUID, the GPU class (`h100-80g`), and the MIG instance (empty for a whole GPU).
 */
export const GPU_LABELS = ["node", "gpu", "uuid", "class", "mig_instance"] as const;
const FABRIC_LABELS = ["node", "adapter", "port", "link_layer"] as const;

export const FLEET = {
  nodes: { name: "llmgw_nodes", help: "Nodes by state.", labels: ["state"] },
  nodeReady: { name: "llmgw_node_ready", help: "1 while the node's agent answers and the node is Ready, 0 when it stopped answering.", labels: ["node"] },
  gpuMemoryTotal: { name: "llmgw_gpu_memory_total_bytes", help: "GPU framebuffer size.", labels: GPU_LABELS },
  gpuMemoryUsed: { name: "llmgw_gpu_memory_used_bytes", help: "GPU framebuffer in use.", labels: GPU_LABELS },
  gpuUtilization: { name: "llmgw_gpu_utilization_ratio", help: "GPU utilisation 0..1 (absent when the driver does not report it).", labels: GPU_LABELS },
  gpuTemperature: { name: "llmgw_gpu_temperature_celsius", help: "GPU core temperature.", labels: GPU_LABELS },
  gpuPower: { name: "llmgw_gpu_power_watts", help: "GPU power draw.", labels: GPU_LABELS },
  gpuHealthy: { name: "llmgw_gpu_healthy", help: "1 when no fault keeps the GPU out of rotation and placement, 0 when one does.", labels: GPU_LABELS },
  gpuFault: {
    name: "llmgw_gpu_fault",
    help: "1 for each kind of fault present on a GPU (xid, ecc, row_remap, page_retirement, temperature, memory_temperature).",
    labels: [...GPU_LABELS, "kind"],
  },
  fabricPortRate: { name: "llmgw_fabric_port_rate_bytes_per_second", help: "Signalling rate of an InfiniBand/RoCE port.", labels: FABRIC_LABELS },
  fabricPortActive: { name: "llmgw_fabric_port_active", help: "1 when the port's state is ACTIVE.", labels: FABRIC_LABELS },
  replicas: { name: "llmgw_replicas", help: "Model replicas by model and state.", labels: ["model", "state"] },
  modelReplicasDesired: { name: "llmgw_model_replicas_desired", help: "Replicas desired per model.", labels: ["model"] },
  modelReplicasServing: { name: "llmgw_model_replicas_serving", help: "Replicas ready and in rotation per model.", labels: ["model"] },
  poolQueueDepth: { name: "llmgw_pool_queue_depth", help: "Requests waiting for admission, by pool and band.", labels: ["pool", "band"] },
  adapterLoads: {
    name: "llmgw_fleet_adapter_loads_total",
    help: "LoRA adapter loads the fleet asked of an agent, by base model and result.",
    labels: ["model", "result"],
  },
  adapterUnloads: {
    name: "llmgw_fleet_adapter_unloads_total",
    help: "LoRA adapter unloads the fleet asked of an agent, by base model and result.",
    labels: ["model", "result"],
  },
  adaptersLoaded: { name: "llmgw_fleet_adapters_loaded", help: "(LoRA adapter, replica) pairs loaded now, by base model.", labels: ["model"] },
  autoscalerDecisions: {
    name: "llmgw_autoscaler_decisions_total",
    help: "Autoscaling decisions by model and reason (the control law's ask, or what stabilization held it to).",
    labels: ["model", "reason"],
  },
  autoscalerAsked: {
    name: "llmgw_autoscaler_asked_replicas",
    help: "Replicas the control law asked for at the last decision, before stabilization.",
    labels: ["model"],
  },
  autoscalerCurrent: { name: "llmgw_autoscaler_current_replicas", help: "Replicas placed and not leaving at the last decision.", labels: ["model"] },
  autoscalerPinned: {
    name: "llmgw_autoscaler_pinned",
    help: "1 while an operator's ctl scale pins the model's count, 0 while the autoscaler sets it.",
    labels: ["model"],
  },
  autoscalerStartup: {
    name: "llmgw_autoscaler_startup_seconds",
    help: "The model's last measured replica start-up, creation to serving (absent until one was measured).",
    labels: ["model"],
  },
} as const;

/**
 * Outcomes that count as the gateway's or the fleet's failure (the error rate
 * of the dashboard and of job:llmgw_request_errors:rate5m in
 * deploy/monitoring/recording.yml): client errors, cancellations and
 * admission rejections are not among them.
 */
export const SERVER_FAULT_OUTCOMES: readonly Outcome[] = ["no_endpoint", "upstream_error", "stream_error", "timeout"];

export const M = {
  requests: { name: "llmgw_requests_total", help: "Requests by model, route and outcome.", labels: ["model", "route", "outcome"] },
  duration: { name: "llmgw_request_duration_seconds", help: "Request duration from arrival to the last byte sent.", labels: ["model", "route", "stream"] },
  ttft: { name: "llmgw_time_to_first_token_seconds", help: "Arrival to the first token relayed to the client (streams).", labels: ["model"] },
  interToken: { name: "llmgw_inter_token_seconds", help: "Gap between consecutive relayed SSE events.", labels: ["model"] },
  tokens: { name: "llmgw_tokens_total", help: "Tokens by model and kind, from the engine's usage report.", labels: ["model", "kind"] },
  retries: { name: "llmgw_retries_total", help: "Upstream retries by the reason the previous attempt failed.", labels: ["model", "reason"] },
  sameEndpointRetries: {
    name: "llmgw_same_endpoint_retries_total",
    help: "Retries sent to the endpoint that just failed because no other endpoint served the model (after max(backoff, Retry-After)).",
    labels: ["model", "reason"],
  },
  fallbacks: { name: "llmgw_fallbacks_total", help: "Requests moved to a fallback model.", labels: ["from_model", "to_model"] },
  attemptFailures: { name: "llmgw_upstream_failures_total", help: "Failed upstream attempts by endpoint and reason.", labels: ["endpoint", "reason"] },
  scorerScore: { name: "llmgw_scorer_score", help: "Score in [0,1] each scorer gave the chosen endpoint.", labels: ["scorer"] },
  filterDrops: { name: "llmgw_filter_drops_total", help: "Endpoints dropped by each filter.", labels: ["filter"] },
  endpointInflight: { name: "llmgw_endpoint_inflight", help: "Requests the router has dispatched or leased to each endpoint.", labels: ["endpoint"] },
  endpointPrefillTokens: {
    name: "llmgw_endpoint_prefill_tokens",
    help: "Uncached prompt tokens the router sent to each endpoint that have not had their first token (kept when a scheduling plugin reads prefill load).",
    labels: ["endpoint"],
  },
  endpointReady: { name: "llmgw_endpoint_ready", help: "1 when the endpoint is up and its models are loaded.", labels: ["endpoint"] },
  endpointCircuit: { name: "llmgw_endpoint_circuit_state", help: "Circuit breaker: 0 closed, 1 open, 2 half-open, 3 probing.", labels: ["endpoint"] },
  endpointMetricsAge: {
    name: "llmgw_endpoint_metrics_age_seconds",
    help: "Age of the engine metrics the router scores on (absent when never scraped).",
    labels: ["endpoint"],
  },
  // What routing reads of each engine, as it reads it: absent while the
  // endpoint's metrics are stale or never came (not a reassuring 0).
  endpointKvCacheUsage: {
    name: "llmgw_endpoint_kv_cache_usage_ratio",
    help: "KV-cache usage 0..1 the endpoint's engine last reported (absent while its metrics are stale or it reports none).",
    labels: ["endpoint"],
  },
  endpointRequestsWaiting: {
    name: "llmgw_endpoint_requests_waiting",
    help: "Requests queued in the endpoint's engine as it last reported (absent while its metrics are stale or it reports none).",
    labels: ["endpoint"],
  },
  endpointRequestsRunning: {
    name: "llmgw_endpoint_requests_running",
    help: "Requests in the endpoint's engine batch as it last reported (absent while its metrics are stale or it reports none).",
    labels: ["endpoint"],
  },
  buildInfo: {
    name: "llmgw_build_info",
    help: "Always 1; the labels say which llmgw runs: its version (package.json), git commit (unknown when not known) and Bun version.",
    labels: ["version", "commit", "bun"],
  },
  modelCircuitTransitions: {
    name: "llmgw_model_circuit_transitions_total",
    help: "Circuit breaker state changes of one model on one endpoint (429s, 5xx, timeouts count against the model; connect failures against the endpoint).",
    labels: ["endpoint", "model", "state"],
  },
  circuitTransitions: {
    name: "llmgw_circuit_transitions_total",
    help: "Circuit breaker state changes by endpoint and new state.",
    labels: ["endpoint", "state"],
  },
  circuitProbes: {
    name: "llmgw_circuit_probes_total",
    help: "Active probes of open circuits (one-token requests of the gateway's own, never a client's) by endpoint and result.",
    labels: ["endpoint", "result"],
  },
  overhead: { name: "llmgw_router_overhead_seconds", help: "Time the router adds before the upstream request is sent (parse, gates, scheduling).", labels: [] },
  admissionQueueDepth: { name: "llmgw_admission_queue_depth", help: "Requests waiting in each band's admission queue.", labels: ["band"] },
  admissionWait: { name: "llmgw_admission_wait_seconds", help: "Time requests waited for admission, by band (granted or not).", labels: ["band"] },
  adminRefusals: {
    name: "llmgw_admin_refusals_total",
    help: "Requests the admin listener refused before any route ran, by reason (host, origin, media_type, token).",
    labels: ["reason"],
  },
  responsesNotStored: {
    name: "llmgw_responses_not_stored_total",
    help: "Responses API answers relayed but not stored (the client asked to store them), by reason (storage_full, store_error, too_large, unreachable_id).",
    labels: ["reason"],
  },
  admissionRejections: {
    name: "llmgw_admission_rejections_total",
    help: "Requests turned away before an engine, by band and reason.",
    labels: ["band", "reason"],
  },
  admissionPath: {
    name: "llmgw_admission_path_total",
    help: "Admission decisions by where they were made: fast (the main thread, no message) or queued (through the scheduler worker).",
    labels: ["path"],
  },
  schedulerMessages: {
    name: "llmgw_scheduler_messages_total",
    help: "Messages the main thread posted to the scheduler worker, by kind (admit, release and cancel are the slow path).",
    labels: ["kind"],
  },
  admissionGrants: {
    name: "llmgw_admission_grants_total",
    help: "Requests admitted, by band and tenant (configured tenants; others are 'other').",
    labels: ["band", "tenant"],
  },
  poolSaturation: {
    name: "llmgw_pool_saturation",
    help: "Pool saturation: the worse of queue pressure and KV occupancy (1 = learned capacity × (1 + headroom)).",
    labels: ["pool"],
  },
  endpointLoraAdapters: {
    name: "llmgw_endpoint_lora_adapters",
    help: "LoRA adapters an endpoint's engine lists in /v1/models (registered), runs in its batch (running) or queues (waiting), from vllm:lora_requests_info (running and waiting absent when its metrics are stale).",
    labels: ["endpoint", "state"],
  },
  endpointLoraSlots: {
    name: "llmgw_endpoint_lora_slots",
    help: "Adapters one step of the endpoint's engine may hold (vLLM's max_lora); absent when it reports none.",
    labels: ["endpoint"],
  },
  endpointCapacity: {
    name: "llmgw_endpoint_capacity",
    help: "Learned batch capacity of each endpoint: the high-water mark of its running count, at least the initial guess.",
    labels: ["endpoint"],
  },
  // Shedding, batch lines, cache, idempotency
  gpuShed: {
    name: "llmgw_gpu_shed_total",
    help: "Requests refused with 429 GPU_SATURATED because their pool's GPUs were saturated (exactly the refusals).",
    labels: ["pool"],
  },
  poolGpuSaturated: {
    name: "llmgw_pool_gpu_saturated",
    help: "1 while every healthy GPU of the pool is in sustained saturation (absent without gpu_health).",
    labels: ["pool"],
  },
  batchLines: {
    name: "llmgw_batch_lines_total",
    help: "Batch line attempts by outcome: completed, failed (recorded), retried (5xx/transport), waited (saturation or rate limit).",
    labels: ["outcome"],
  },
  batchLineWaits: {
    name: "llmgw_batch_line_waits_total",
    help: "Batch lines put back to run again later, by reason: waits for capacity (no attempt spent) and engine failures retried with backoff (engine_error).",
    labels: ["reason"],
  },
  jobsStoreAvailable: {
    name: "llmgw_jobs_store_available",
    help: "1 while the batch store (files, batches, idempotency records) can be used; 0 once it was found corrupt (jobs refused with 503 JOBS_UNAVAILABLE, inference served).",
    labels: [],
  },
  uploadBytesHeld: {
    name: "llmgw_upload_memory_bytes",
    help: "Bytes that uploads in progress and transcription forms awaiting their answer hold in memory (bounded by batch.upload_memory_bytes).",
    labels: [],
  },
  cacheLookups: { name: "llmgw_response_cache_lookups_total", help: "Response-cache lookups of cacheable requests, by result.", labels: ["result"] },
  cacheBytes: { name: "llmgw_response_cache_bytes", help: "Bytes held by the in-process response cache.", labels: [] },
  idempotentReplays: { name: "llmgw_idempotent_replays_total", help: "Answers replayed from idempotency records instead of running the request.", labels: [] },
  deadlinesExcused: {
    name: "llmgw_deadlines_excused_total",
    help: "Silence deadlines (first token, inter-token) that fired while the gateway's own event loop had stalled: the request failed, the engine was not blamed.",
    labels: ["deadline"],
  },
  loopStalls: {
    name: "llmgw_event_loop_stall_seconds",
    help: "Stalls of the gateway's main event loop longer than 50 ms, by cause: gateway (the loop was busy or blocked) or cpu_wait (it was ready but waited for a CPU: the host is oversubscribed; Linux only).",
    labels: ["cause"],
  },
  // Mid-stream continuation
  streamRecoveries: {
    name: "llmgw_stream_recoveries_total",
    help: "Streams broken after their first byte (cut, stall, engine error, drained) by how they were handled: recovered by a continuation on another replica, or why not.",
    labels: ["model", "cause", "result"],
  },
  streamRecoverySeconds: {
    name: "llmgw_stream_recovery_seconds",
    help: "From a stream's break to the first token of its continuation relayed to the client (the TTFT of the recovered segment).",
    labels: ["model"],
  },
  toolCalls: {
    name: "llmgw_tool_calls_total",
    help: "Tool calls in answers relayed to clients (streamed or not, chat and the Responses API), counted for requests that offered tools.",
    labels: ["model", "route"],
  },
  malformedEvents: {
    name: "llmgw_upstream_malformed_events_total",
    help: "SSE events from engines that were not valid and were dropped.",
    labels: ["endpoint"],
  },
} as const;

// ---- Several gateways sharing Redis. Present only with state.backend: redis.

/** Where a quota decision came from: the local allowance, a fetch from Redis, or the local share while Redis is away. */
export const QUOTA_SOURCES = ["local", "fetched", "fail_static"] as const;

export const CLUSTER = {
  redisUp: { name: "llmgw_state_redis_up", help: "1 while Redis (the shared state) answers; 0 while this gateway fails static.", labels: [] },
  redisCommands: { name: "llmgw_state_redis_commands_total", help: "Commands this gateway sent to Redis (a script counts once).", labels: [] },
  redisFailures: {
    name: "llmgw_state_redis_failures_total",
    help: "Redis commands that failed for want of Redis (unreachable or no answer in time).",
    labels: [],
  },
  leader: { name: "llmgw_cluster_leader", help: "1 while this gateway holds the reconciler lease.", labels: [] },
  gateways: { name: "llmgw_cluster_gateways", help: "Gateways seen in the last demand exchange, this one included.", labels: [] },
  poolShare: { name: "llmgw_cluster_pool_share", help: "This gateway's share of each pool's admission capacity (0..1).", labels: ["pool"] },
  quotaDecisions: {
    name: "llmgw_quota_decisions_total",
    help: "Shared-quota admissions by source: local allowance, fetched from Redis, or fail-static local share.",
    labels: ["source"],
  },
} as const;

// ---- Live API keys (created through the admin API; not the config's auth.keys).

/** The `key` label of keys past the cap (and the label's cap itself): live key ids are made at run time, so the series they make are bounded. */
export const OTHER_KEY = "other";
export const KEY_SERIES_CAP = 200;

export const KEYS = {
  requests: {
    name: "llmgw_key_requests_total",
    help: `Inference requests finished under each live API key, by key id (the first ${KEY_SERIES_CAP} keys seen by this gateway; later ones are 'other').`,
    labels: ["key"],
  },
  tokens: {
    name: "llmgw_key_tokens_total",
    help: "Tokens of the requests under each live API key, by key id (bounded as llmgw_key_requests_total) and direction: in (prompt) or out (completion).",
    labels: ["key", "direction"],
  },
  active: { name: "llmgw_live_keys", help: "Live API keys that authenticate on this gateway now (not revoked, a secret not expired).", labels: [] },
} as const;

// ---- Engines' KV-cache events and precise prefix routing. Per endpoint that
// publishes events (absent for the others); read from shared memory at scrape time.

/** KV-cache event types as the `event` label of llmgw_kv_events_total. */
export const KV_EVENT_TYPES = ["block_stored", "block_removed", "all_blocks_cleared"] as const;
/** How a request's token ids were found: in the tokenize cache (hit), from the engine's /tokenize (miss), or not at all and why. */
export const TOKENIZE_RESULTS = ["hit", "miss", "timeout", "error", "busy"] as const;
export type TokenizeResult = (typeof TOKENIZE_RESULTS)[number];
/** Why a request was not tokenized. */
export const TOKENIZE_SKIPS = ["short", "no_live_stream", "not_text", "lora_adapter"] as const;
export type TokenizeSkip = (typeof TOKENIZE_SKIPS)[number];

export const KV = {
  events: { name: "llmgw_kv_events_total", help: "KV-cache events received from each endpoint's engine, by type.", labels: ["endpoint", "event"] },
  indexBlocks: { name: "llmgw_kv_index_blocks", help: "Blocks of 16 tokens the gateway's KV-block index holds for each endpoint.", labels: ["endpoint"] },
  streamLive: {
    name: "llmgw_kv_events_stream_state",
    help: "Each endpoint's KV-event stream: 1 for its current state (syncing, live, stale), 0 for the others.",
    labels: ["endpoint", "state"],
  },
  staleness: {
    name: "llmgw_kv_events_staleness_seconds",
    help: "Time since the endpoint's event publisher last sent anything, heartbeat replies included (absent until it has).",
    labels: ["endpoint"],
  },
  replays: {
    name: "llmgw_kv_events_replays_total",
    help: "Replays asked of the endpoint's replay socket (on every connection and on every gap in the sequence).",
    labels: ["endpoint"],
  },
  drops: {
    name: "llmgw_kv_index_drops_total",
    help: "Times the endpoint's whole index was dropped, by reason: the publisher restarted, a replay could not fill a gap, the engine cleared its cache.",
    labels: ["endpoint", "reason"],
  },
  evicted: {
    name: "llmgw_kv_index_evicted_blocks_total",
    help: "Blocks the index let go, oldest first, to stay under kv_events.index_blocks.",
    labels: ["endpoint"],
  },
  skipped: {
    name: "llmgw_kv_index_skipped_blocks_total",
    help: "Stored blocks not indexed: unknown parent, no token ids, a LoRA adapter or extra keys, another medium or block size.",
    labels: ["endpoint"],
  },
  invalid: { name: "llmgw_kv_events_invalid_batches_total", help: "Event batches from the endpoint that did not decode (dropped).", labels: ["endpoint"] },
  rejected: {
    name: "llmgw_kv_events_rejected_total",
    help: "Events refused whole before touching the index, by reason: oversized (more index entries than one event may take), token-count (token ids not block_size per block), hash-length (a block hash over 64 bytes).",
    labels: ["endpoint", "reason"],
  },
  droppedBatches: {
    name: "llmgw_kv_events_dropped_batches_total",
    help: "Received batches the worker dropped rather than hold, by the bound reached: endpoint-bytes, gateway-bytes, or batches (live ones waiting for a replay); the endpoint's index is dropped with them.",
    labels: ["endpoint", "bound"],
  },
  listenPublishers: {
    name: "llmgw_kv_events_listen_publishers",
    help: "Engine publishers connected to the gateway's bound SUB socket (kv_events.listen); absent when none is bound.",
    labels: [],
  },
  listenRefused: {
    name: "llmgw_kv_events_listen_refused_total",
    help: "Connections to the bound SUB socket closed on arrival because kv_events.listen_max_publishers were connected.",
    labels: [],
  },
  unrouted: {
    name: "llmgw_kv_events_unrouted_messages_total",
    help: "Messages on the bound SUB socket dropped before any endpoint's stream, by reason: unknown-topic (no endpoint's kv_events.topic), malformed (not [topic, seq, payload]).",
    labels: ["reason"],
  },
  tokenize: {
    name: "llmgw_tokenize_requests_total",
    help: "Requests that needed their prompt's token ids for precise-prefix routing, by how they got them: hit (tokenize cache), miss (the engine's /tokenize in time), timeout, error or busy (routed without).",
    labels: ["result"],
  },
  tokenizeSkipped: {
    name: "llmgw_tokenize_skipped_total",
    help: "Requests not tokenized: prompt too short, no endpoint of the model with a live event stream, or a prompt that is not text (token ids are used as they are).",
    labels: ["reason"],
  },
  tokenizeSeconds: {
    name: "llmgw_tokenize_duration_seconds",
    help: "Round trip of the gateway's calls to an engine's /tokenize, by outcome (ok, error; the request may have gone on without it).",
    labels: ["outcome"],
  },
} as const;

/** OpenTelemetry export (series registered only while tracing is on: absent, not zero, when off). */
export const TRACING = {
  spansDropped: {
    name: "llmgw_trace_spans_dropped_total",
    help: "Finished spans dropped before export because tracing.max_queue_spans were already waiting (the collector is slow or away).",
  },
  exportFailures: {
    name: "llmgw_trace_export_failures_total",
    help: "OTLP export requests that failed (their spans are lost).",
  },
} as const;

/** How a configuration reload ended: applied, the file invalid, or a change that needs a restart. */
export const CONFIG_RELOAD_RESULTS = ["ok", "invalid", "refused"] as const;

/** Configuration reloads (SIGHUP, `llmgw ctl reload`, POST /admin/v1/reload). */
export const CONFIG_RELOAD = {
  total: {
    name: "llmgw_config_reload_total",
    help: "Configuration reloads by result: ok (applied), invalid (the file did not validate), refused (a key that needs a restart changed); the running configuration is kept unless ok.",
  },
  lastSuccess: {
    name: "llmgw_config_last_reload_success",
    help: "1 if the last configuration reload was applied (or none was tried since start), 0 if it was invalid or refused.",
  },
  lastTimestamp: {
    name: "llmgw_config_last_reload_timestamp_seconds",
    help: "Unix time of the last configuration reload attempt, whatever its result (the start until one is tried).",
  },
} as const;
