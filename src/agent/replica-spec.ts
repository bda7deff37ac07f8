/** The desired spec of one replica (`PUT /v1/replicas/{id}` body): zod wire schema, normalized type, fingerprint. */
import { z } from "zod";

const ENGINE_KINDS = ["vllm", "sglang", "sim"] as const;
export type EngineKind = (typeof ENGINE_KINDS)[number];

/** Replica ids name pid and log files, so they stay file-name safe. */
export const REPLICA_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

const portSchema = z.int().min(1).max(65535);

export const replicaSpecSchema = z.strictObject({
  engine: z.enum(ENGINE_KINDS),
  model: z.string().min(1),
  /** GPU indices on this node (nvidia-smi `index`). */
  gpus: z.array(z.int().min(0)).default([]),
  tensorParallel: z.int().min(1).default(1),
  pipelineParallel: z.int().min(1).default(1),
  /** Absent: the agent picks a free port and keeps it for this spec. */
  port: portSchema.optional(),
  quantization: z.string().min(1).optional(),
  maxNumSeqs: z.int().min(1).optional(),
  gpuMemoryUtilization: z.number().gt(0).max(1).optional(),
  multiNode: z
    .strictObject({
      nnodes: z.int().min(1),
      nodeRank: z.int().min(0),
      masterAddr: z.string().min(1),
      masterPort: portSchema.optional(),
    })
    .optional(),
  /** Fabric adapters (names under /sys/class/infiniband) NCCL may use; absent: no NCCL_IB_* settings. */
  fabric: z
    .strictObject({
      adapters: z.array(z.string().regex(/^[A-Za-z0-9_.-]+$/)).min(1),
      socketIfname: z.string().min(1).optional(),
    })
    .optional(),
  /**
   * vLLM and sim-engine: publish KV-cache events on ports the agent
   * allocates and reports with the replica. Absent: on (SGLang: never).
   */
  kvEvents: z.boolean().optional(),
  /** sim-engine only: simulated weight-loading time. */
  startupMs: z.int().min(0).optional(),
  /** LoRA (vllm, sim): --enable-lora with these slots, and adapters loaded at run time (PUT /v1/replicas/{id}/adapters/{name}). */
  lora: z
    .strictObject({
      maxLoras: z.int().min(1).max(256),
      maxLoraRank: z.int().min(1).max(512).optional(),
      maxCpuLoras: z.int().min(1).optional(),
    })
    .optional(),
  /** vllm, sim: the variable of the agent's environment holding the engine's API key (the key never travels). */
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]*$/)
    .optional(),
  extraArgs: z.array(z.string()).default([]),
  env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string()).default({}),
});

export type ReplicaSpec = z.infer<typeof replicaSpecSchema>;

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = canonical(v);
    }
    return out;
  }
  return value;
}

/** Stable text of a normalized spec: equal specs (defaults applied, key order ignored) give equal fingerprints. */
export function specFingerprint(spec: ReplicaSpec): string {
  return JSON.stringify(canonical(spec));
}

/** Total GPUs across nodes the parallel layout asks for. */
export function worldSize(spec: ReplicaSpec): number {
  return spec.tensorParallel * spec.pipelineParallel;
}

/** Whether a replica publishes KV-cache events: vLLM and the sim-engine unless turned off, on the rank that serves (a headless vLLM rank runs no scheduler). */
export function publishesKvEvents(spec: ReplicaSpec): boolean {
  if (spec.engine === "sglang" || spec.kvEvents === false) return false;
  return spec.multiNode === undefined || spec.multiNode.nodeRank === 0;
}
