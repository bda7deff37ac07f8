/**
 * Wire schemas of the fleet manager's configuration (`data_dir`, `nodes:`,
 * `fleet:`) and of a desired model, shared by llmgw.yaml and the management
 * API, plus their conversion to the validated camelCase form.
 */
import { z } from "zod";
import * as D from "./defaults.ts";
import type { FleetAutoscalingSpec, FleetConfig, FleetModelSpec, NodeConfig } from "./types.ts";
import { modelName as anyModelName, httpUrl, id } from "./wire-primitives.ts";

const FLEET_ENGINES = ["vllm", "sglang", "sim"] as const;

/** Node and pool names: file-name and label safe. */
const fleetName = id;

/** A model name becomes an engine argument: the gateway's rule for names, no whitespace, and never a leading '-' that an engine would read as a flag. */
export const fleetModelName = anyModelName.refine((name) => !/\s/.test(name) && !name.startsWith("-"), {
  message: "expected a model name without whitespace that does not start with '-'",
});

const ms = (min: number, max: number, fallback: number) => z.number().int().min(min).max(max).default(fallback);

/** vLLM's accepted --max-lora-rank values (vllm/config/lora.py). */
const FLEET_LORA_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;

/** A LoRA adapter the fleet may load onto the model's replicas: the name requests use, and the path the engine reads it from. */
const fleetAdapterSchema = z.strictObject({
  name: fleetModelName,
  path: z.string().min(1).max(4096),
});

/** The replica count follows load within bounds; what is absent takes the autoscaler's defaults (src/control/autoscale/policy.ts). */
const fleetAutoscalingSchema = z.strictObject({
  min_replicas: z.number().int().min(0).max(1000),
  max_replicas: z.number().int().min(1).max(1000),
  /** The latency each request should meet: TTFT and mean inter-token time (TPOT), at a percentile of requests. */
  slo: z.strictObject({
    ttft_ms: z.number().int().min(1).max(3_600_000),
    itl_ms: z.number().int().min(1).max(600_000),
    percentile: z.number().gt(0).lt(100).optional(),
  }),
  /** capacity: forecast demand over what a replica holds (llmgw's); latency: the SLO ratio (llm-d's KEDA formula). */
  law: z.enum(["capacity", "latency"]).optional(),
  interval_ms: z.number().int().min(100).max(600_000).optional(),
  scale_up_window_ms: z.number().int().min(0).max(86_400_000).optional(),
  scale_down_window_ms: z.number().int().min(0).max(86_400_000).optional(),
  max_surge: z.number().int().min(1).max(1000).optional(),
  scale_down_every_ms: z.number().int().min(0).max(86_400_000).optional(),
  target_utilization: z.number().gt(0).max(1).optional(),
  /** The start-up (launch to serving) assumed until one is measured. */
  assumed_startup_ms: z.number().int().min(0).max(86_400_000).optional(),
  /** Prompt tokens one replica prefills a second at full load, as measured (e.g. with vLLM's benchmark); absent: learned from TTFT against traffic. */
  prompt_tokens_per_replica_s: z.number().positive().max(100_000_000).optional(),
  /** Idle, the model goes to zero replicas (min_replicas 0); its next request waits for one to start. */
  scale_to_zero: z.boolean().optional(),
  /** With scale_to_zero: how long a request for the model at zero waits for a replica (then 503 with Retry-After). */
  cold_start_wait_ms: z.number().int().min(100).max(3_600_000).optional(),
});

/** The fields of a desired model (without its name), as people write them. */
const fleetModelFields = {
  engine: z.enum(FLEET_ENGINES),
  replicas: z.number().int().min(0).max(1000),
  /** GPUs of one node a replica uses (tensor parallel within the node). */
  tensor_parallel: z.number().int().min(1).max(64).default(1),
  /** Nodes one replica spans (pipeline parallel across them); more than 1 needs a shared fabric. */
  nodes_per_replica: z.number().int().min(1).max(64).default(1),
  /** Only GPUs of this class (as the agent reports it, e.g. h100-80g). */
  gpu_class: z
    .string()
    .regex(/^[a-z0-9-]+$/, { message: "expected a GPU class such as h100-80g" })
    .optional(),
  /** Only GPUs with at least this much memory (GiB as the driver reports it). */
  min_gpu_memory_gib: z.number().positive().max(100_000).optional(),
  quantization: z
    .string()
    .regex(/^[A-Za-z0-9_.-]+$/, { message: "expected a quantization name such as fp8" })
    .optional(),
  engine_args: z.array(z.string()).max(200).default([]),
  pool: fleetName.default("default"),
  max_num_seqs: z.number().int().min(1).max(1_000_000).optional(),
  gpu_memory_utilization: z.number().gt(0).max(1).optional(),
  /** sim engine only: simulated weight loading. */
  startup_ms: z.number().int().min(0).max(3_600_000).optional(),
  /** LoRA adapters (vllm and sim): replicas start with LoRA on; each adapter is loaded where its requests arrive and unloaded when idle. */
  adapters: z.array(fleetAdapterSchema).max(D.MAX_FLEET_ADAPTERS).default([]),
  /** With adapters: GPU slots per replica (vLLM's --max-loras); default DEFAULT_FLEET_MAX_LORAS. */
  max_loras: z.number().int().min(1).max(256).optional(),
  /** With adapters: the largest adapter rank (--max-lora-rank); vLLM's default 16. */
  max_lora_rank: z.union(FLEET_LORA_RANKS.map((r) => z.literal(r))).optional(),
  /** With adapters: adapters kept in host memory (--max-cpu-loras); vLLM's default max_loras. */
  max_cpu_loras: z.number().int().min(1).max(100_000).optional(),
  /**
   * vllm and sim: replicas want this key (`Authorization: Bearer …`); the name of an environment variable that holds
   * it on every agent (the engine gets it as VLLM_API_KEY) and on the gateway (which sends it). The key never crosses the wire.
   */
  api_key_env: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "expected an environment variable name" })
    .optional(),
  /** Absent: the replica count is what operators set. Present: the autoscaler sets it, starting from `replicas`. */
  autoscaling: fleetAutoscalingSchema.optional(),
};

export const fleetModelSchema = z.strictObject({ name: fleetModelName, ...fleetModelFields });
/** A partial change of a desired model (management API PATCH): only the fields given change. */
export const fleetModelPatchSchema = z.strictObject(fleetModelFields).partial();

type FleetModelWire = z.output<typeof fleetModelSchema>;

/** Cross-field rules of one model, as `field: message` lines (empty when valid). */
export function fleetModelIssues(m: FleetModelWire): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  if (m.startup_ms !== undefined && m.engine !== "sim") issues.push({ path: "startup_ms", message: "applies to engine sim only" });
  if (m.nodes_per_replica > 1 && m.engine === "sim") issues.push({ path: "nodes_per_replica", message: "the sim engine runs on one node" });
  if (m.api_key_env !== undefined && m.engine === "sglang")
    issues.push({
      path: "api_key_env",
      message: "SGLang takes its key on the command line only, where every user of the node reads it: vllm and sim replicas take one",
    });
  if (m.adapters.length > 0 && m.engine === "sglang")
    issues.push({ path: "adapters", message: "LoRA adapters are loaded at run time on vllm and sim replicas only" });
  const hasLora = m.adapters.length > 0;
  for (const key of ["max_loras", "max_lora_rank", "max_cpu_loras"] as const) {
    if (m[key] !== undefined && !hasLora) issues.push({ path: key, message: "applies with adapters only" });
  }
  if (m.max_cpu_loras !== undefined && m.max_cpu_loras < (m.max_loras ?? D.DEFAULT_FLEET_MAX_LORAS)) {
    issues.push({ path: "max_cpu_loras", message: `expected at least max_loras (${m.max_loras ?? D.DEFAULT_FLEET_MAX_LORAS})` });
  }
  const a = m.autoscaling;
  if (a) {
    if (a.min_replicas < 1 && a.scale_to_zero !== true)
      issues.push({ path: "autoscaling.min_replicas", message: "expected at least 1, or 0 with scale_to_zero: true" });
    if (a.cold_start_wait_ms !== undefined && a.scale_to_zero !== true)
      issues.push({ path: "autoscaling.cold_start_wait_ms", message: "applies with scale_to_zero: true only" });
    if (a.max_replicas < a.min_replicas) issues.push({ path: "autoscaling.max_replicas", message: `expected at least min_replicas (${a.min_replicas})` });
    else if (m.replicas < a.min_replicas || m.replicas > a.max_replicas)
      issues.push({
        path: "replicas",
        message: `expected within autoscaling's bounds, ${a.min_replicas}..${a.max_replicas} (the count the autoscaler starts from)`,
      });
  }
  const seen = new Set<string>([m.name]);
  m.adapters.forEach((a, i) => {
    if (seen.has(a.name)) issues.push({ path: `adapters[${i}].name`, message: `'${a.name}' is already the model's or another adapter's name` });
    seen.add(a.name);
  });
  return issues;
}

export function toFleetModel(m: FleetModelWire): FleetModelSpec {
  return {
    name: m.name,
    engine: m.engine,
    replicas: m.replicas,
    tensorParallel: m.tensor_parallel,
    nodesPerReplica: m.nodes_per_replica,
    gpuClass: m.gpu_class,
    minGpuMemoryGiB: m.min_gpu_memory_gib,
    quantization: m.quantization,
    engineArgs: [...m.engine_args],
    pool: m.pool,
    maxNumSeqs: m.max_num_seqs,
    gpuMemoryUtilization: m.gpu_memory_utilization,
    startupMs: m.startup_ms,
    adapters: m.adapters.map((a) => ({ name: a.name, path: a.path })),
    ...(m.api_key_env !== undefined ? { apiKeyEnv: m.api_key_env } : {}),
    ...(m.autoscaling !== undefined ? { autoscaling: toAutoscaling(m.autoscaling) } : {}),
    lora:
      m.adapters.length > 0
        ? {
            maxLoras: m.max_loras ?? D.DEFAULT_FLEET_MAX_LORAS,
            ...(m.max_lora_rank !== undefined ? { maxLoraRank: m.max_lora_rank } : {}),
            ...(m.max_cpu_loras !== undefined ? { maxCpuLoras: m.max_cpu_loras } : {}),
          }
        : undefined,
  };
}

function toAutoscaling(a: z.output<typeof fleetAutoscalingSchema>): FleetAutoscalingSpec {
  const optional = {
    law: a.law,
    intervalMs: a.interval_ms,
    scaleUpWindowMs: a.scale_up_window_ms,
    scaleDownWindowMs: a.scale_down_window_ms,
    maxSurge: a.max_surge,
    scaleDownEveryMs: a.scale_down_every_ms,
    targetUtilization: a.target_utilization,
    assumedStartupMs: a.assumed_startup_ms,
    promptTokensPerReplicaS: a.prompt_tokens_per_replica_s,
    scaleToZero: a.scale_to_zero,
    coldStartWaitMs: a.cold_start_wait_ms,
  };
  return {
    minReplicas: a.min_replicas,
    maxReplicas: a.max_replicas,
    slo: { ttftMs: a.slo.ttft_ms, itlMs: a.slo.itl_ms, ...(a.slo.percentile !== undefined ? { percentile: a.slo.percentile } : {}) },
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
  };
}

function autoscalingWire(a: FleetAutoscalingSpec): z.output<typeof fleetAutoscalingSchema> {
  const optional = {
    law: a.law,
    interval_ms: a.intervalMs,
    scale_up_window_ms: a.scaleUpWindowMs,
    scale_down_window_ms: a.scaleDownWindowMs,
    max_surge: a.maxSurge,
    scale_down_every_ms: a.scaleDownEveryMs,
    target_utilization: a.targetUtilization,
    assumed_startup_ms: a.assumedStartupMs,
    prompt_tokens_per_replica_s: a.promptTokensPerReplicaS,
    scale_to_zero: a.scaleToZero,
    cold_start_wait_ms: a.coldStartWaitMs,
  };
  return {
    min_replicas: a.minReplicas,
    max_replicas: a.maxReplicas,
    slo: { ttft_ms: a.slo.ttftMs, itl_ms: a.slo.itlMs, ...(a.slo.percentile !== undefined ? { percentile: a.slo.percentile } : {}) },
    ...Object.fromEntries(Object.entries(optional).filter(([, v]) => v !== undefined)),
  };
}

/** The wire form of a validated model (what the management API returns and PATCH merges into). */
export function fleetModelWire(m: FleetModelSpec): FleetModelWire {
  return {
    name: m.name,
    engine: m.engine,
    replicas: m.replicas,
    tensor_parallel: m.tensorParallel,
    nodes_per_replica: m.nodesPerReplica,
    engine_args: [...m.engineArgs],
    pool: m.pool,
    ...(m.gpuClass !== undefined ? { gpu_class: m.gpuClass } : {}),
    ...(m.minGpuMemoryGiB !== undefined ? { min_gpu_memory_gib: m.minGpuMemoryGiB } : {}),
    ...(m.quantization !== undefined ? { quantization: m.quantization } : {}),
    ...(m.maxNumSeqs !== undefined ? { max_num_seqs: m.maxNumSeqs } : {}),
    ...(m.gpuMemoryUtilization !== undefined ? { gpu_memory_utilization: m.gpuMemoryUtilization } : {}),
    ...(m.startupMs !== undefined ? { startup_ms: m.startupMs } : {}),
    adapters: m.adapters.map((a) => ({ name: a.name, path: a.path })),
    ...(m.lora !== undefined ? { max_loras: m.lora.maxLoras } : {}),
    ...(m.lora?.maxLoraRank !== undefined ? { max_lora_rank: m.lora.maxLoraRank as (typeof FLEET_LORA_RANKS)[number] } : {}),
    ...(m.lora?.maxCpuLoras !== undefined ? { max_cpu_loras: m.lora.maxCpuLoras } : {}),
    ...(m.apiKeyEnv !== undefined ? { api_key_env: m.apiKeyEnv } : {}),
    ...(m.autoscaling !== undefined ? { autoscaling: autoscalingWire(m.autoscaling) } : {}),
  };
}

export const nodeSchema = z
  .strictObject({
    name: fleetName,
    /** The agent's API base URL. */
    url: httpUrl,
    /** The agent's bearer token, or the name of the environment variable holding it. */
    token: z.string().min(1).optional(),
    token_env: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "expected an environment variable name" })
      .optional(),
    /** dcgm-exporter of this node: XID, ECC and temperature faults keep its GPUs out of placement. */
    dcgm_url: httpUrl.optional(),
  })
  .refine((n) => (n.token === undefined) !== (n.token_env === undefined), { message: "expected exactly one of token or token_env" });

const secret = z.string().min(16, { message: "expected at least 16 characters" });

export const fleetSchema = z.strictObject({
  models: z.array(fleetModelSchema).default([]),
  /** Bearer token for management API writes (also LLMGW_FLEET__ADMIN_TOKEN). Unset: writes are refused. */
  admin_token: secret.optional(),
  /** Shared token agents present to register themselves (also LLMGW_FLEET__REGISTRATION_TOKEN). Unset: no self-registration. */
  registration_token: secret.optional(),
  agent_poll_interval_ms: ms(50, 600_000, D.DEFAULT_AGENT_POLL_INTERVAL_MS),
  agent_poll_timeout_ms: ms(50, 600_000, D.DEFAULT_AGENT_POLL_TIMEOUT_MS),
  agent_call_timeout_ms: ms(100, 3_600_000, D.DEFAULT_AGENT_CALL_TIMEOUT_MS),
  node_not_ready_after_ms: ms(100, 86_400_000, D.DEFAULT_NODE_NOT_READY_AFTER_MS),
  reconcile_interval_ms: ms(20, 600_000, D.DEFAULT_RECONCILE_INTERVAL_MS),
  drain_grace_ms: ms(0, 86_400_000, D.DEFAULT_DRAIN_GRACE_MS),
  replica_ready_timeout_ms: ms(100, 86_400_000, D.DEFAULT_REPLICA_READY_TIMEOUT_MS),
  failure_backoff_base_ms: ms(10, 3_600_000, D.DEFAULT_FAILURE_BACKOFF_BASE_MS),
  failure_backoff_max_ms: ms(10, 86_400_000, D.DEFAULT_FAILURE_BACKOFF_MAX_MS),
  registration_interval_ms: ms(100, 86_400_000, D.DEFAULT_REGISTRATION_INTERVAL_MS),
  /** An adapter unused on a replica for this long is unloaded there. */
  adapter_idle_unload_ms: ms(1_000, 86_400_000, D.DEFAULT_ADAPTER_IDLE_UNLOAD_MS),
  /** A request for a declared adapter loaded nowhere waits this long for the fleet to load it (then 503). */
  adapter_load_wait_ms: ms(100, 600_000, D.DEFAULT_ADAPTER_LOAD_WAIT_MS),
});

/** Defaults of the fleet block, for configSchema's `.default(...)`. */
export const FLEET_DEFAULTS = fleetSchema.parse({});

type FleetWire = z.output<typeof fleetSchema>;
type NodeWire = z.output<typeof nodeSchema>;

/** Cross-field issues of `data_dir`, `nodes` and `fleet`, as `path: message` lines. */
export function fleetConfigIssues(nodes: readonly NodeWire[], fleet: FleetWire, env: Record<string, string | undefined>): string[] {
  const issues: string[] = [];
  const names = new Map<string, number>();
  nodes.forEach((n, i) => {
    const first = names.get(n.name);
    if (first !== undefined) issues.push(`nodes[${i}].name: duplicate node '${n.name}' (also nodes[${first}])`);
    else names.set(n.name, i);
    if (n.token_env !== undefined && !env[n.token_env]) issues.push(`nodes[${i}].token_env: environment variable ${n.token_env} is not set`);
  });
  const models = new Map<string, number>();
  fleet.models.forEach((m, i) => {
    const first = models.get(m.name);
    if (first !== undefined) issues.push(`fleet.models[${i}].name: duplicate model '${m.name}' (also fleet.models[${first}])`);
    else models.set(m.name, i);
    for (const issue of fleetModelIssues(m)) issues.push(`fleet.models[${i}].${issue.path}: ${issue.message}`);
    if (m.api_key_env !== undefined && !env[m.api_key_env])
      issues.push(`fleet.models[${i}].api_key_env: environment variable ${m.api_key_env} is not set or empty (the gateway sends the replicas' key)`);
  });
  // A request names a model or an adapter: every name in the fleet means one thing.
  const adapterOwner = new Map<string, number>();
  fleet.models.forEach((m, i) => {
    m.adapters.forEach((a, j) => {
      if (models.has(a.name) && a.name !== m.name) issues.push(`fleet.models[${i}].adapters[${j}].name: '${a.name}' is also a model of the fleet`);
      const owner = adapterOwner.get(a.name);
      if (owner !== undefined && owner !== i) issues.push(`fleet.models[${i}].adapters[${j}].name: '${a.name}' is also an adapter of fleet.models[${owner}]`);
      else adapterOwner.set(a.name, i);
    });
  });
  if (fleet.node_not_ready_after_ms <= fleet.agent_poll_interval_ms) {
    issues.push(`fleet.node_not_ready_after_ms: expected more than fleet.agent_poll_interval_ms (${fleet.agent_poll_interval_ms})`);
  }
  if (fleet.failure_backoff_max_ms < fleet.failure_backoff_base_ms) {
    issues.push(`fleet.failure_backoff_max_ms: expected at least fleet.failure_backoff_base_ms (${fleet.failure_backoff_base_ms})`);
  }
  return issues;
}

export function toNodeConfigs(nodes: readonly NodeWire[], env: Record<string, string | undefined>): NodeConfig[] {
  return nodes.map((n) => ({ name: n.name, url: n.url.replace(/\/+$/, ""), token: n.token ?? env[n.token_env ?? ""] ?? "", dcgmUrl: n.dcgm_url }));
}

export function toFleetConfig(f: FleetWire): FleetConfig {
  return {
    models: f.models.map(toFleetModel),
    adminToken: f.admin_token,
    registrationToken: f.registration_token,
    agentPollIntervalMs: f.agent_poll_interval_ms,
    agentPollTimeoutMs: f.agent_poll_timeout_ms,
    agentCallTimeoutMs: f.agent_call_timeout_ms,
    nodeNotReadyAfterMs: f.node_not_ready_after_ms,
    reconcileIntervalMs: f.reconcile_interval_ms,
    drainGraceMs: f.drain_grace_ms,
    replicaReadyTimeoutMs: f.replica_ready_timeout_ms,
    failureBackoffBaseMs: f.failure_backoff_base_ms,
    failureBackoffMaxMs: f.failure_backoff_max_ms,
    registrationIntervalMs: f.registration_interval_ms,
    adapterIdleUnloadMs: f.adapter_idle_unload_ms,
    adapterLoadWaitMs: f.adapter_load_wait_ms,
  };
}
