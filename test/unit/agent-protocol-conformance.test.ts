/** The gateway and the agent agree on the wire: specs the control plane builds pass the agent's own schema, and what the agent answers passes the gateway's. */
import { describe, expect, test } from "bun:test";
import { gpuHealth, gpuView } from "../../src/agent/gpu-health.ts";
import { replicaSpecSchema } from "../../src/agent/replica-spec.ts";
import { fleetModelSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import { buildReplicaRecord } from "../../src/control/replica-builder.ts";
import { type AgentReplicaSpec, type AgentState, agentStateSchema } from "../../src/protocol/agent-messages.ts";
import { agentGpus } from "../fixtures/fleet/gpus.ts";

describe("gateway ↔ agent protocol", () => {
  test("every replica spec the control plane builds is accepted by the agent's schema, unchanged", () => {
    const models = [
      { name: "sim-llama", engine: "sim", replicas: 1, startup_ms: 500 },
      {
        name: "meta-llama/Llama-3.1-70B-Instruct",
        engine: "vllm",
        replicas: 1,
        tensor_parallel: 4,
        quantization: "fp8",
        max_num_seqs: 128,
        gpu_memory_utilization: 0.9,
        engine_args: ["--max-model-len", "8192"],
      },
      { name: "Qwen/Qwen2.5-72B", engine: "sglang", replicas: 1, tensor_parallel: 8, nodes_per_replica: 2 },
    ];
    for (const raw of models) {
      const spec = toFleetModel(fleetModelSchema.parse(raw));
      const shards = Array.from({ length: spec.nodesPerReplica }, (_, i) => ({
        node: `n${i}`,
        gpus: Array.from({ length: spec.tensorParallel }, (_, g) => g),
      }));
      for (const shard of buildReplicaRecord(spec, shards, "fl-x-aaaaaa", 0, () => "10.0.0.1").shards) {
        const sent: AgentReplicaSpec = JSON.parse(JSON.stringify(shard.spec));
        const parsed = replicaSpecSchema.safeParse(sent);
        expect({ model: raw.name, ok: parsed.success, issues: parsed.error?.issues ?? [] }).toEqual({ model: raw.name, ok: true, issues: [] });
        expect(parsed.data).toMatchObject(sent);
      }
    }
  });

  test("a state the agent builds from the captures passes the gateway's schema", () => {
    // A driver that reports little: everything optional absent, and no process list.
    const sparse = agentGpus("h100", 2, "c").map((g) => ({
      index: g.index,
      uuid: g.uuid,
      name: g.name,
      memoryTotalMiB: g.memoryTotalMiB ?? undefined,
      computeCapability: g.computeCapability ?? undefined,
      memoryUsedMiB: undefined,
      eccUncorrectedVolatile: undefined,
      eccCorrectedVolatile: undefined,
      migEnabled: undefined,
      utilizationPct: undefined,
    }));
    const fromAgentCode = sparse.map((g) =>
      gpuView(
        g,
        gpuHealth(g, undefined, () => true),
      ),
    );
    const state: AgentState = { node: "host", gpus: fromAgentCode, fabric: { adapters: [], island: "single-node" }, replicas: [] };
    const parsed = agentStateSchema.safeParse(JSON.parse(JSON.stringify(state)));
    expect(parsed.success).toBe(true);
    // Absent values travel as null, never as 0.
    expect(parsed.data!.gpus[0]).toMatchObject({ utilizationPct: null, memoryUsedMiB: null, eccUncorrectedVolatile: null, health: { foreignProcesses: null } });
  });
});
