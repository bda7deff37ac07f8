/**
 * The contract every fleet store backend must keep (src/control/store.ts),
 * as a reusable suite: the embedded sqlite backend runs it today, a Redis
 * backend (issue 14) runs the same one.
 */
import { describe, expect, test } from "bun:test";
import { fleetModelSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import type { FleetStore } from "../../src/control/store.ts";
import type { Cordon, DrainOp, NodeBinding, RegisteredNode, ReplicaRecord, StoredModel } from "../../src/control/types.ts";

export const SAMPLE_MODEL: StoredModel = {
  spec: toFleetModel(
    fleetModelSchema.parse({
      name: "meta-llama/Llama-3.1-8B-Instruct",
      engine: "vllm",
      replicas: 2,
      tensor_parallel: 2,
      quantization: "fp8",
      gpu_class: "h100-80g",
      engine_args: ["--max-model-len", "8192"],
    }),
  ),
  source: "config",
  configHash: "abc",
  updatedAt: 1_000,
};

export const SAMPLE_REPLICA: ReplicaRecord = {
  id: "fl-llama-abc123",
  model: "meta-llama/Llama-3.1-8B-Instruct",
  pool: "default",
  engine: "vllm",
  shards: [
    {
      node: "node-a",
      agentId: "fl-llama-abc123",
      gpus: [0, 1],
      rank: 0,
      spec: {
        engine: "vllm",
        model: "meta-llama/Llama-3.1-8B-Instruct",
        gpus: [0, 1],
        tensorParallel: 2,
        pipelineParallel: 1,
        quantization: "fp8",
        extraArgs: ["--max-model-len", "8192"],
      },
    },
  ],
  createdAt: 2_000,
  draining: { since: 3_000, reason: "drain", graceMs: 60_000 },
};

const CORDON: Cordon = { node: "node-a", reason: "maintenance", at: 4_000 };
const DRAIN: DrainOp = { node: "node-a", startedAt: 5_000, graceMs: 60_000, state: "running", finishedAt: null };
const NODE: RegisteredNode = { name: "node-b", url: "http://10.0.0.2:7070", token: "t", dcgmUrl: undefined, registeredAt: 6_000 };

/** `open(dir)` opens the backend on `dir` (the same dir reopens the same data); `fresh()` gives a new dir. */
export function fleetStoreContract(backend: string, fresh: () => string, open: (dir: string) => FleetStore): void {
  describe(`fleet store contract: ${backend}`, () => {
    test("every collection round-trips its records; list is ordered by key; put overwrites; delete says whether there was one", async () => {
      const store = open(fresh());
      expect(await store.models.list()).toEqual([]);
      expect(await store.replicas.get("nope")).toBeUndefined();
      await store.models.put(SAMPLE_MODEL.spec.name, SAMPLE_MODEL);
      await store.replicas.put(SAMPLE_REPLICA.id, SAMPLE_REPLICA);
      await store.cordons.put(CORDON.node, CORDON);
      await store.drains.put(DRAIN.node, DRAIN);
      await store.nodes.put(NODE.name, NODE);
      expect(await store.models.get(SAMPLE_MODEL.spec.name)).toEqual(SAMPLE_MODEL);
      expect(await store.replicas.get(SAMPLE_REPLICA.id)).toEqual(SAMPLE_REPLICA);
      expect(await store.cordons.list()).toEqual([CORDON]);
      expect(await store.drains.list()).toEqual([DRAIN]);
      expect(await store.nodes.list()).toEqual([NODE]);
      await store.cordons.put("node-0", { ...CORDON, node: "node-0" });
      expect((await store.cordons.list()).map((c) => c.node)).toEqual(["node-0", "node-a"]);
      await store.drains.put(DRAIN.node, { ...DRAIN, state: "done", finishedAt: 9_000 });
      expect(await store.drains.get(DRAIN.node)).toMatchObject({ state: "done", finishedAt: 9_000 });
      expect(await store.replicas.delete(SAMPLE_REPLICA.id)).toBe(true);
      expect(await store.replicas.delete(SAMPLE_REPLICA.id)).toBe(false);
      expect(await store.replicas.list()).toEqual([]);
      await store.close();
    });

    test("putIfAbsent writes only where nothing is, and says whether it did (how a node name is bound once across gateways)", async () => {
      const store = open(fresh());
      const first: NodeBinding = { node: "node-b", keySha256: "a".repeat(64), url: "http://10.0.0.2:7070", boundAt: 7_000 };
      const second: NodeBinding = { ...first, keySha256: "b".repeat(64), url: "http://10.6.6.6:7070" };
      const raced = await Promise.all([store.bindings.putIfAbsent("node-b", first), store.bindings.putIfAbsent("node-b", second)]);
      expect(raced.filter(Boolean).length).toBe(1);
      const held = await store.bindings.get("node-b");
      expect(held).toEqual(raced[0] ? first : second);
      expect(await store.bindings.putIfAbsent("node-b", second)).toBe(false);
      expect(await store.bindings.delete("node-b")).toBe(true);
      expect(await store.bindings.putIfAbsent("node-b", second)).toBe(true);
      expect(await store.bindings.get("node-b")).toEqual(second);
      await store.close();
    });

    test("collections do not see each other's keys", async () => {
      const store = open(fresh());
      await store.cordons.put("x", { ...CORDON, node: "x" });
      expect(await store.drains.get("x")).toBeUndefined();
      expect(await store.nodes.delete("x")).toBe(false);
      await store.close();
    });

    test("what was written survives closing and reopening", async () => {
      const dir = fresh();
      const first = open(dir);
      await first.models.put(SAMPLE_MODEL.spec.name, SAMPLE_MODEL);
      await first.replicas.put(SAMPLE_REPLICA.id, SAMPLE_REPLICA);
      await first.close();
      const second = open(dir);
      expect(await second.models.list()).toEqual([SAMPLE_MODEL]);
      expect(await second.replicas.list()).toEqual([SAMPLE_REPLICA]);
      await second.close();
    });
  });
}
