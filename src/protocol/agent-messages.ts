/**
 * Typed messages between the gateway (control plane) and node agents: the
 * agent's answers (inventory, state, replica status), the replica spec the
 * gateway PUTs, and the registration an agent sends to the gateway. The
 * agent's server is typed against these; the gateway parses every answer
 * with the schemas, so an agent that answers garbage is an error on that
 * node, never a crash or a half-read state.
 */
import { z } from "zod";
import type { GpuReport } from "./gpu-report.ts";

/** GPU health flags an agent reports (src/agent/gpu-health.ts). */
const GPU_HEALTH_REASONS = ["ecc_uncorrected", "foreign_process", "mig_enabled"] as const;
type GpuHealthReason = (typeof GPU_HEALTH_REASONS)[number];
/** Flags that refuse new replicas on a GPU (a foreign process is reported, not refused). */
export const BLOCKING_GPU_HEALTH_REASONS: readonly GpuHealthReason[] = ["ecc_uncorrected", "mig_enabled"];

const AGENT_REPLICA_STATES = ["Starting", "Loading", "Ready", "Failed", "Stopped"] as const;
export type AgentReplicaState = (typeof AGENT_REPLICA_STATES)[number];

export const AGENT_ENGINES = ["vllm", "sglang", "sim"] as const;

const agentGpuSchema = z.object({
  index: z.number().int().min(0),
  uuid: z.string(),
  name: z.string(),
  class: z.string(),
  memoryTotalMiB: z.number().nullable(),
  memoryTotalGiB: z.number().nullable(),
  memoryUsedMiB: z.number().nullable(),
  computeCapability: z.string().nullable(),
  utilizationPct: z.number().nullable(),
  eccUncorrectedVolatile: z.number().nullable(),
  eccCorrectedVolatile: z.number().nullable(),
  migEnabled: z.boolean().nullable(),
  health: z.object({
    ok: z.boolean(),
    reasons: z.array(z.enum(GPU_HEALTH_REASONS)),
    foreignProcesses: z.array(z.object({ pid: z.number().int(), usedMemoryMiB: z.number().nullable() })).nullable(),
  }),
});
export type AgentGpu = z.infer<typeof agentGpuSchema>;

const agentFabricSchema = z.object({
  adapters: z.array(
    z.object({
      name: z.string(),
      ports: z.array(
        z.object({
          port: z.number().int(),
          state: z.string().nullable(),
          active: z.boolean(),
          rate: z.string().nullable(),
          rateGbps: z.number().nullable(),
          linkLayer: z.string().nullable(),
          transport: z.enum(["ib", "roce", "other"]),
        }),
      ),
    }),
  ),
  island: z.enum(["single-node", "fabric"]),
});

const agentReplicaStatusSchema = z.object({
  id: z.string(),
  engine: z.enum(AGENT_ENGINES),
  model: z.string(),
  gpus: z.array(z.number().int()),
  port: z.number().int(),
  endpoint: z.string(),
  state: z.enum(AGENT_REPLICA_STATES),
  pid: z.number().int().nullable(),
  restarts: z.number().int(),
  adopted: z.boolean(),
  exitCode: z.number().int().nullable(),
  exitSignal: z.string().nullable(),
  message: z.string().nullable(),
  /** null when no restart is pending: a Failed replica with null here stays Failed. */
  nextRestartInMs: z.number().nullable(),
  logTail: z.array(z.string()).nullable(),
  /** Where the engine publishes vLLM's KV-cache events (ZMQ); null or absent (older agents) when it publishes none. */
  kvEvents: z.object({ endpoint: z.string(), replayEndpoint: z.string().nullable(), topic: z.string() }).nullable().optional(),
});
export type AgentReplicaStatus = z.infer<typeof agentReplicaStatusSchema>;

/** GET /v1/state */
export const agentStateSchema = z.object({
  node: z.string(),
  gpus: z.array(agentGpuSchema),
  fabric: agentFabricSchema,
  replicas: z.array(agentReplicaStatusSchema),
});
export type AgentState = z.infer<typeof agentStateSchema>;

/** GET /v1/inventory */
const agentInventorySchema = z.object({
  node: z.string(),
  gpus: z.array(agentGpuSchema),
  fabric: agentFabricSchema,
});
export type AgentInventory = z.infer<typeof agentInventorySchema>;

const PUT_OUTCOMES = ["created", "unchanged", "replaced"] as const;

/** PUT /v1/replicas/{id}: 201 created, 200 unchanged or replaced. */
export const agentPutReplicaResponseSchema = z.object({ outcome: z.enum(PUT_OUTCOMES), replica: agentReplicaStatusSchema });
export type AgentPutReplicaResponse = z.infer<typeof agentPutReplicaResponseSchema>;

/** DELETE /v1/replicas/{id} */
export const agentDeleteReplicaResponseSchema = z.object({ id: z.string(), deleted: z.literal(true) });
export type AgentDeleteReplicaResponse = z.infer<typeof agentDeleteReplicaResponseSchema>;

/** The body of PUT /v1/replicas/{id} as the gateway sends it (the agent validates it with its own schema). */
export interface AgentReplicaSpec {
  engine: (typeof AGENT_ENGINES)[number];
  model: string;
  gpus: number[];
  tensorParallel: number;
  pipelineParallel: number;
  quantization?: string;
  maxNumSeqs?: number;
  gpuMemoryUtilization?: number;
  multiNode?: { nnodes: number; nodeRank: number; masterAddr: string; masterPort?: number };
  fabric?: { adapters: string[]; socketIfname?: string };
  startupMs?: number;
  /** false: no KV-cache events (absent: the agent has vLLM and the sim-engine publish them). */
  kvEvents?: boolean;
  /** LoRA on (vllm, sim): the engine starts with --enable-lora and these slots, and takes adapters at run time. */
  lora?: { maxLoras: number; maxLoraRank?: number; maxCpuLoras?: number };
  /** The agent's environment variable holding the engine's API key (the key itself never travels). */
  apiKeyEnv?: string;
  extraArgs: string[];
  env?: Record<string, string>;
}

/** PUT or DELETE /v1/replicas/{id}/adapters/{name}: what the replica's engine did (loaded, already had it, unloaded, did not have it). */
export const agentAdapterResponseSchema = z.object({
  replica: z.string(),
  adapter: z.string(),
  outcome: z.enum(["loaded", "unchanged", "unloaded", "absent"]),
});
export type AgentAdapterResponse = z.infer<typeof agentAdapterResponseSchema>;

/** Node names the control plane uses (config `nodes[].name`, registration `node`). */
export const NODE_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** Where an agent registers on the gateway's admin listener. */
export const AGENT_REGISTRATION_PATH = "/admin/v1/fleet/register";

/** POST AGENT_REGISTRATION_PATH (agent → gateway, bearer: the shared registration token). */
export const agentRegistrationSchema = z.strictObject({
  node: z.string().regex(NODE_NAME_RE, { message: "expected a node name of letters, digits, '.', '_' or '-' (at most 63)" }),
  /** The agent's API base URL as the gateway can reach it. */
  url: z.url({ protocol: /^https?$/, message: "expected an http(s) URL" }),
  /** The agent's own bearer token, for the gateway's calls to it. */
  token: z.string().min(1).max(4096),
  /** The node's dcgm-exporter, if any. */
  dcgm_url: z.url({ protocol: /^https?$/, message: "expected an http(s) URL" }).optional(),
  /**
   * The agent's own node key (random, kept in its state directory): the first
   * registration with a key binds the node's name to it, and every later one
   * under that name must present the same key (src/control/node-binding.ts).
   * Absent from agents older than the binding: their names stay unbound.
   */
  node_key: z.string().min(32, { message: "expected a node key of at least 32 characters" }).max(256).optional(),
});
export type AgentRegistration = z.infer<typeof agentRegistrationSchema>;

export const agentRegistrationResponseSchema = z.object({
  node: z.string(),
  accepted: z.literal(true),
  /** Register again within this long (the gateway forgets nothing, but a moved agent is found again). */
  reregister_interval_ms: z.number().int().positive(),
});
export type AgentRegistrationResponse = z.infer<typeof agentRegistrationResponseSchema>;

/** What a poll of one agent found (health worker → main thread), with the node's DCGM verdicts when it has an exporter. */
export interface AgentSnapshot {
  /** The latest poll answered with a valid state. */
  ok: boolean;
  /** The last valid state (kept when later polls fail); undefined until one arrives. */
  state: AgentState | undefined;
  /** Date.now() when the poll that produced `state` started (replicas created before it must appear in it). */
  stateRequestedAt: number | undefined;
  /** Date.now() when that answer arrived. */
  answeredAt: number | undefined;
  consecutiveFailures: number;
  lastError: string | undefined;
  dcgm: DcgmVerdicts | undefined;
}

/** Per-GPU fault verdicts of a node's dcgm-exporter (src/gpuhealth/assess.ts), keyed for matching with the agent's GPUs. */
export interface DcgmVerdicts {
  ok: boolean;
  sampledAt: number | undefined;
  stale: boolean;
  lastError: string | undefined;
  /** `report`: the GPU's figures as the exporter sent them (memory, utilisation, temperature, power), for the fleet's GPU series. */
  gpus: { uuid: string; index: number | undefined; reasons: string[]; report: GpuReport }[];
}

/**
 * Fencing: the gateway that holds the reconciler lease sends its
 * lease's token with every replica PUT and DELETE; an agent remembers the
 * highest token it has seen (in its state directory) and refuses a lower one
 * with 409 STALE_FENCING_TOKEN, so a paused old leader cannot act after a new
 * one took over. A call without the header (a single gateway, no lease) is
 * not fenced.
 */
export const FENCING_TOKEN_HEADER = "x-llmgw-fencing-token";
