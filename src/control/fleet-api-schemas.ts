/** The management API's bodies as zod schemas: they validate requests, document every route in OpenAPI, and type the views (snake_case, absent values null). */
import { z } from "zod";
import { fleetModelSchema } from "../config/fleet-schema.ts";
import { PLACEMENT_RULES, REJECTION_CODES } from "./placement-types.ts";

/** Where the management API lives on the admin listener. */
export const FLEET_API_PREFIX = "/admin/v1/fleet";

const nodeStates = ["Ready", "NotReady", "Unknown"] as const;
const phases = ["Pending", "Starting", "Ready", "Missing", "Failed", "Lost"] as const;

export const errorSchema = z.object({
  error: z.object({ message: z.string(), type: z.string(), param: z.string().nullable(), code: z.string() }),
});

export const gpuStatusSchema = z.object({
  node: z.string(),
  index: z.number().int(),
  uuid: z.string(),
  name: z.string(),
  class: z.string(),
  memory_gib: z.number().nullable(),
  memory_used_mib: z.number().nullable().describe("null when the driver does not report it"),
  utilization_pct: z.number().nullable().describe("null when the driver does not report it (never 0 for unknown)"),
  compute_capability: z.string().nullable(),
  healthy: z.boolean(),
  faults: z.array(z.string()).describe("why the GPU is kept out of placement (agent health flags, DCGM XID/ECC/temperature)"),
  used_by: z.string().nullable().describe("the replica holding it"),
});

export const drainSummarySchema = z.object({
  state: z.enum(["running", "done", "cancelled"]),
  started_at: z.number().int(),
  grace_ms: z.number().int(),
  finished_at: z.number().int().nullable(),
});

export const nodeStatusSchema = z.object({
  name: z.string(),
  url: z.string(),
  source: z.enum(["config", "registered"]),
  state: z.enum(nodeStates),
  cordoned: z.boolean(),
  cordon_reason: z.string().nullable(),
  drain: drainSummarySchema.nullable(),
  last_answer_age_ms: z.number().int().nullable().describe("since the agent last answered; null when it never did"),
  last_error: z.string().nullable().describe("the latest poll or call error of this agent"),
  agent_hostname: z.string().nullable(),
  fabric: z.enum(["fabric", "single-node"]).nullable(),
  gpus: z.array(gpuStatusSchema),
  replicas: z.array(z.string()),
});

export const shardStatusSchema = z.object({
  node: z.string(),
  agent_id: z.string(),
  rank: z.number().int(),
  gpus: z.array(z.number().int()),
  state: z.string().describe("the agent's replica state, or Pending / Missing / Unreachable"),
  endpoint: z.string().nullable(),
  restarts: z.number().int().nullable(),
  message: z.string().nullable(),
  log_tail: z.array(z.string()).nullable(),
  kv_events: z
    .object({ endpoint: z.string(), replay_endpoint: z.string().nullable(), topic: z.string() })
    .nullable()
    .describe("where the engine publishes its KV-cache events (ZMQ), as its agent reports; null when it publishes none"),
});

export const replicaStatusSchema = z.object({
  id: z.string(),
  model: z.string(),
  pool: z.string(),
  engine: z.string(),
  phase: z.enum(phases),
  detail: z.string().nullable(),
  in_rotation: z.boolean(),
  leaving: z.object({ reason: z.enum(["drain", "scale-down", "model-removed"]), since: z.number().int() }).nullable(),
  inflight: z.number().int().nullable().describe("requests open on it in the gateway; null when not in the gateway"),
  created_at: z.number().int(),
  last_error: z.string().nullable(),
  shards: z.array(shardStatusSchema),
});

export const failedReplicaSchema = z.object({
  id: z.string(),
  model: z.string(),
  nodes: z.array(z.string()),
  at: z.number().int(),
  reason: z.string(),
  log_tail: z.array(z.string()).nullable(),
});

export const modelStatusSchema = z.object({
  name: z.string(),
  source: z.enum(["config", "api"]),
  desired: z.number().int(),
  active: z.number().int().describe("placed and not leaving (starting or ready)"),
  ready: z.number().int(),
  serving: z.number().int().describe("in the gateway's rotation"),
  leaving: z.number().int(),
  failures: z.number().int().describe("consecutive failed replicas (reset when one becomes Ready)"),
  next_attempt_in_ms: z.number().int().nullable(),
  pinned: z.boolean().describe("an autoscaled model whose count an operator set: the autoscaler leaves it until released"),
  spec: fleetModelSchema,
  adapters: z
    .array(
      z.object({
        name: z.string(),
        path: z.string(),
        loaded_on: z.array(z.string()).describe("serving replicas whose engine lists it"),
        running_on: z.array(z.string()).describe("replicas running requests with it"),
        waiting_on: z.array(z.string()).describe("replicas where its requests queue behind full LoRA slots"),
        last_request_ms_ago: z.number().int().nullable().describe("since a request last named it at this gateway"),
      }),
    )
    .describe("the model's declared LoRA adapters and where they are loaded"),
});

export const candidateSchema = z.object({
  node: z.string(),
  gpus: z.array(z.number().int()),
  gpu_class: z.string().nullable(),
  verdict: z.enum(["chosen", "eligible", "rejected"]),
  rank: z.number().int().nullable(),
  reasons: z.array(z.object({ code: z.enum(REJECTION_CODES), message: z.string() })),
  // Defaults let a newer ctl read an older gateway's answer, which has no scores.
  score: z
    .object({
      model_replicas: z.number().int().describe("replicas of the model already on the node (spread: fewer is better)"),
      free_gpus_after: z.number().int().describe("healthy free GPUs the node keeps after this placement (pack: fewer is better)"),
    })
    .nullable()
    .default(null)
    .describe("what the policy compared, in order; null when rejected"),
});

const shardSchema = z.object({ node: z.string(), gpus: z.array(z.number().int()) });

export const placementSchema = z.object({
  model: z.string(),
  requested: z.number().int(),
  placed: z.number().int(),
  unplaced_reason: z.string().nullable(),
  candidates: z.array(candidateSchema),
  placements: z.array(z.array(shardSchema)),
  decision: z
    .object({
      rule: z.enum(PLACEMENT_RULES).describe("spread, pack, then the tie-breaks node-name and lowest-gpu; only-candidate when nothing else was eligible"),
      winner: shardSchema,
      runner_up: shardSchema.nullable(),
    })
    .nullable()
    .default(null)
    .describe("the rule that ranked the first eligible candidate ahead of the second; null when nothing was eligible"),
});

export const drainProgressSchema = z.object({
  node: z.string(),
  state: z.enum(["running", "done", "cancelled"]),
  started_at: z.number().int(),
  grace_ms: z.number().int(),
  grace_left_ms: z.number().int().nullable(),
  finished_at: z.number().int().nullable(),
  replicas: z.array(z.object({ id: z.string(), model: z.string(), phase: z.enum(phases), waiting_for: z.array(z.string()) })),
  waiting_for: z.array(z.string()).describe("what the drain waits for, one line each; empty when done"),
});

export const cordonBodySchema = z.strictObject({ reason: z.string().max(500).optional() }).optional();
export const drainBodySchema = z.strictObject({ grace_ms: z.number().int().min(0).max(86_400_000).optional() }).optional();

export type GpuStatus = z.infer<typeof gpuStatusSchema>;
export type NodeStatus = z.infer<typeof nodeStatusSchema>;
export type ReplicaStatus = z.infer<typeof replicaStatusSchema>;
export type FailedReplicaStatus = z.infer<typeof failedReplicaSchema>;
/** GET /autoscale: each autoscaled model, its inputs and its last decisions. */
export const autoscaleStatusSchema = z.object({
  model: z.string(),
  leader: z.boolean().describe("this gateway decides (with several gateways only the leader does; a follower shows no decisions)"),
  pinned: z.boolean().describe("an operator's ctl scale set the count; the autoscaler leaves it until `ctl scale MODEL auto`"),
  pinned_at: z.string().nullable(),
  current: z.number().int().describe("replicas placed and not leaving at the last decision"),
  ready: z.number().int().describe("of those, serving"),
  desired: z.number().int().describe("the count the fleet holds now"),
  policy: z.object({
    law: z.enum(["capacity", "latency"]),
    min_replicas: z.number().int(),
    max_replicas: z.number().int(),
    slo: z.object({ ttft_ms: z.number(), itl_ms: z.number(), percentile: z.number() }),
    interval_ms: z.number().int(),
    scale_up_window_ms: z.number().int(),
    scale_down_window_ms: z.number().int(),
    max_surge: z.number().int(),
    scale_down_every_ms: z.number().int(),
    target_utilization: z.number(),
    assumed_startup_ms: z.number().int(),
    prompt_tokens_per_replica_s: z.number().nullable().describe("configured; null: learned from traffic"),
  }),
  startup_ms: z.number().int().nullable().describe("the last start-up measured, creation to serving; null until one was"),
  decisions: z
    .array(
      z.object({
        at: z.string(),
        current: z.number().int(),
        asked: z.number().int().describe("what the control law asked for"),
        desired: z.number().int(),
        reason: z.string(),
        figures: z.record(z.string(), z.number().nullable()).describe("what the law read"),
      }),
    )
    .describe("the last decisions this gateway took (up to 100), newest first"),
});

export type ModelStatus = z.infer<typeof modelStatusSchema>;
export type AutoscaleStatus = z.infer<typeof autoscaleStatusSchema>;
export type PlacementStatus = z.infer<typeof placementSchema>;
export type DrainProgress = z.infer<typeof drainProgressSchema>;

/** POST /nodes/{node}/rebind */
export const rebindSchema = z.object({
  node: z.string(),
  was_bound: z.boolean().describe("the name was bound to an agent's node key (false: an agent without a key held it, or it was already open)"),
});
