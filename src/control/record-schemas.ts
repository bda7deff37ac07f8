/**
 * How each stored record is checked when read back: a row that a person
 * edited badly or a newer version wrote is skipped with a warning, never
 * half-read. Shared by every store backend. Desired models are stored in
 * their wire form so the config schema checks them.
 */
import { z } from "zod";
import { fleetModelName, fleetModelSchema, fleetModelWire, toFleetModel } from "../config/fleet-schema.ts";
import { AGENT_ENGINES } from "../protocol/agent-messages.ts";
import { logger } from "../shared/logger.ts";
import { quotedName } from "../shared/model-name.ts";
import type { CollectionName } from "./store.ts";
import type { Cordon, DrainOp, NodeBinding, RegisteredNode, ReplicaRecord, StoredModel } from "./types.ts";

/**
 * A stored adapter whose name breaks the rule for names (one the API took
 * before it checked them: NUL, U+202E…) is dropped on read with a warning,
 * rather than the whole model being skipped and its replicas stopped.
 */
function withoutRefusedAdapters(spec: unknown): unknown {
  if (typeof spec !== "object" || spec === null || !("adapters" in spec) || !Array.isArray(spec.adapters)) return spec;
  const adapters = spec.adapters as unknown[];
  const kept = adapters.filter((a) => typeof a !== "object" || a === null || !("name" in a) || fleetModelName.safeParse(a.name).success);
  if (kept.length === adapters.length) return spec;
  const dropped = adapters.filter((a) => !kept.includes(a)).map((a) => quotedName(String((a as { name: unknown }).name)));
  logger().warn(
    { model: "name" in spec ? String(spec.name) : undefined, dropped },
    "fleet store: adapters with names the fleet refuses dropped from a stored model",
  );
  return { ...spec, adapters: kept };
}

const storedModelWire = z.object({
  spec: z.preprocess(withoutRefusedAdapters, fleetModelSchema),
  source: z.enum(["config", "api"]),
  configHash: z.string().nullable(),
  updatedAt: z.number(),
  pinnedAt: z.number().optional(),
});

const cordon = z.object({ node: z.string(), reason: z.string().nullable(), at: z.number() });

const drain = z.object({
  node: z.string(),
  startedAt: z.number(),
  graceMs: z.number().int().min(0),
  state: z.enum(["running", "done", "cancelled"]),
  finishedAt: z.number().nullable(),
});

const registeredNode = z.object({ name: z.string(), url: z.string(), token: z.string(), dcgmUrl: z.string().optional(), registeredAt: z.number() });

const binding = z.object({ node: z.string(), keySha256: z.string().regex(/^[0-9a-f]{64}$/), url: z.string(), boundAt: z.number() });

const agentSpec = z.object({
  engine: z.enum(AGENT_ENGINES),
  model: z.string(),
  gpus: z.array(z.number().int()),
  tensorParallel: z.number().int(),
  pipelineParallel: z.number().int(),
  quantization: z.string().optional(),
  maxNumSeqs: z.number().int().optional(),
  gpuMemoryUtilization: z.number().optional(),
  multiNode: z.object({ nnodes: z.number().int(), nodeRank: z.number().int(), masterAddr: z.string(), masterPort: z.number().int().optional() }).optional(),
  fabric: z.object({ adapters: z.array(z.string()), socketIfname: z.string().optional() }).optional(),
  startupMs: z.number().int().optional(),
  lora: z.object({ maxLoras: z.number().int(), maxLoraRank: z.number().int().optional(), maxCpuLoras: z.number().int().optional() }).optional(),
  extraArgs: z.array(z.string()),
  env: z.record(z.string(), z.string()).optional(),
});

const replica = z.object({
  id: z.string(),
  model: z.string(),
  pool: z.string(),
  engine: z.enum(AGENT_ENGINES),
  shards: z.array(z.object({ node: z.string(), agentId: z.string(), gpus: z.array(z.number().int()), rank: z.number().int(), spec: agentSpec })).min(1),
  createdAt: z.number(),
  draining: z.object({ since: z.number(), reason: z.enum(["drain", "scale-down", "model-removed"]), graceMs: z.number().int().min(0) }).nullable(),
});

/** A stored record read back, or undefined (logged) when it is not a valid one: every backend skips such a record the same way. */
export function readRecord<T>(codec: RecordCodec<T>, collection: CollectionName, key: string, text: string): T | undefined {
  const r = codec.decode(text);
  if ("value" in r) return r.value;
  logger().warn({ collection, key, error: r.error }, "fleet store: unreadable record skipped");
  return undefined;
}

/** A record as JSON text, and back (undefined plus the reason when the text is not a valid record). */
export interface RecordCodec<T> {
  encode(value: T): string;
  decode(text: string): { value: T } | { error: string };
}

function codec<S extends z.ZodType, T>(schema: S, toRecord: (parsed: z.output<S>) => T, toWire: (value: T) => unknown = (v) => v): RecordCodec<T> {
  return {
    encode: (value) => JSON.stringify(toWire(value)),
    decode(text) {
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        return { error: "not JSON" };
      }
      const parsed = schema.safeParse(json);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        return { error: `${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "invalid"}` };
      }
      return { value: toRecord(parsed.data) };
    },
  };
}

/** The record type of each collection. */
export interface RecordTypes {
  models: StoredModel;
  cordons: Cordon;
  drains: DrainOp;
  nodes: RegisteredNode;
  replicas: ReplicaRecord;
  bindings: NodeBinding;
}

export const RECORD_CODECS: { [K in CollectionName]: RecordCodec<RecordTypes[K]> } = {
  models: codec(
    storedModelWire,
    (p): StoredModel => ({ ...p, spec: toFleetModel(p.spec) }),
    (m) => ({ ...m, spec: fleetModelWire(m.spec) }),
  ),
  cordons: codec(cordon, (p): Cordon => p),
  drains: codec(drain, (p): DrainOp => p),
  nodes: codec(registeredNode, (p): RegisteredNode => ({ ...p, dcgmUrl: p.dcgmUrl })),
  replicas: codec(replica, (p): ReplicaRecord => p),
  bindings: codec(binding, (p): NodeBinding => p),
};
