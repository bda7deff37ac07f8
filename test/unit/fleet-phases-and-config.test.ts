/** Replica phases from agent polls, node states from answer times, config vs stored desired models, and the fleet config keys. */
import { describe, expect, test } from "bun:test";
import { fleetModelSchema, toFleetModel } from "../../src/config/fleet-schema.ts";
import { buildConfig, ConfigError } from "../../src/config/load.ts";
import { configModelChanges, specHash } from "../../src/control/desired-state.ts";
import { nodeState } from "../../src/control/node-registry.ts";
import { buildReplicaRecord, modelSlug, newReplicaId, replicaIdOf } from "../../src/control/replica-builder.ts";
import { derivePhase, type NodeObservation, type ReplicaRuntime } from "../../src/control/replica-phase.ts";
import type { ReplicaRecord } from "../../src/control/types.ts";
import type { AgentReplicaStatus, AgentSnapshot } from "../../src/protocol/agent-messages.ts";

const spec = (over: Record<string, unknown> = {}) => toFleetModel(fleetModelSchema.parse({ name: "m", engine: "sim", replicas: 1, ...over }));
const REC: ReplicaRecord = buildReplicaRecord(spec(), [{ node: "a", gpus: [0] }], "fl-m-aaaaaa", 0, () => "10.0.0.1");

function status(over: Partial<AgentReplicaStatus> = {}): AgentReplicaStatus {
  return {
    id: "fl-m-aaaaaa",
    engine: "sim",
    model: "m",
    gpus: [0],
    port: 1,
    endpoint: "http://10.0.0.1:1",
    state: "Ready",
    pid: 1,
    restarts: 0,
    adopted: false,
    exitCode: null,
    exitSignal: null,
    message: null,
    nextRestartInMs: null,
    logTail: null,
    ...over,
  };
}

function observed(over: Partial<NodeObservation> & { replicas?: ReadonlyMap<string, AgentReplicaStatus> } = {}): Map<string, NodeObservation> {
  return new Map([["a", { state: "Ready", replicas: new Map(), stateRequestedAt: 100, ...over }]]);
}

function runtime(over: Partial<ReplicaRuntime> = {}): ReplicaRuntime {
  return { launchedAt: {}, failure: null, trackedSince: 0, busy: false, ...over };
}

const phase = (nodes: Map<string, NodeObservation>, rt: ReplicaRuntime = runtime(), now = 200) => derivePhase(REC, nodes, rt, now, 10_000);

describe("replica phase", () => {
  test("Ready when every shard is; Starting while the agent restarts it; Failed once the agent gave up", () => {
    expect(phase(observed({ replicas: new Map([[REC.id, status()]]) })).phase).toBe("Ready");
    expect(phase(observed({ replicas: new Map([[REC.id, status({ state: "Loading" })]]) }))).toMatchObject({
      phase: "Starting",
      detail: "shard 0 on a: Loading",
    });
    expect(phase(observed({ replicas: new Map([[REC.id, status({ state: "Failed", nextRestartInMs: 2000, message: "exited" })]]) })).phase).toBe("Starting");
    expect(
      phase(
        observed({
          replicas: new Map([[REC.id, status({ state: "Failed", message: "exited (code 1); not restarted after 5 restart(s)", logTail: ["boom"] })]]),
        }),
      ),
    ).toMatchObject({
      phase: "Failed",
      detail: "shard 0 on a: exited (code 1); not restarted after 5 restart(s)",
    });
  });

  test("Missing only when the agent answered a request sent after the launch; Pending before, and while a call is in flight", () => {
    expect(phase(observed({ stateRequestedAt: 100 }), runtime({ launchedAt: { [REC.id]: 150 } })).phase).toBe("Pending");
    expect(phase(observed({ stateRequestedAt: 160 }), runtime({ launchedAt: { [REC.id]: 150 } })).phase).toBe("Missing");
    expect(phase(observed({ stateRequestedAt: 160 }), runtime({ busy: true })).phase).toBe("Pending");
    // Loaded after a restart (never launched by this process): any answer counts.
    expect(phase(observed({ stateRequestedAt: 1 })).phase).toBe("Missing");
    expect(phase(observed({ stateRequestedAt: undefined, state: "Unknown" })).phase).toBe("Pending");
  });

  test("Lost when its node is NotReady or no longer registered; Failed after the Ready timeout or when given up on", () => {
    expect(phase(observed({ state: "NotReady" }))).toMatchObject({ phase: "Lost", detail: "node a is NotReady" });
    expect(phase(new Map())).toMatchObject({ phase: "Lost", detail: "node a is not registered" });
    expect(phase(observed({ replicas: new Map([[REC.id, status({ state: "Starting" })]]) }), runtime(), 10_001)).toMatchObject({
      phase: "Failed",
      detail: "not Ready after 10 s",
    });
    expect(phase(observed(), runtime({ failure: "launch refused by a: gpu-in-use" }))).toMatchObject({
      phase: "Failed",
      detail: "launch refused by a: gpu-in-use",
    });
  });
});

describe("node state", () => {
  const snap = (answeredAt: number | undefined): AgentSnapshot => ({
    ok: answeredAt !== undefined,
    state: undefined,
    stateRequestedAt: answeredAt,
    answeredAt,
    consecutiveFailures: 0,
    lastError: undefined,
    dcgm: undefined,
  });
  test("Ready while answered within the time; NotReady after; Unknown before the first answer for at most that long", () => {
    expect(nodeState({ snapshot: snap(1_000), trackedSince: 0 }, 2_000, 1_500)).toBe("Ready");
    expect(nodeState({ snapshot: snap(1_000), trackedSince: 0 }, 2_501, 1_500)).toBe("NotReady");
    expect(nodeState({ snapshot: undefined, trackedSince: 0 }, 1_500, 1_500)).toBe("Unknown");
    expect(nodeState({ snapshot: undefined, trackedSince: 0 }, 1_501, 1_500)).toBe("NotReady");
  });
});

describe("replica ids and specs", () => {
  test("ids are file-name safe, carry the fleet prefix, and shards of a multi-node replica get ranks", () => {
    expect(modelSlug("meta-llama/Llama-3.1-8B-Instruct")).toBe("meta-llama-llama-3.1-8b-instruct");
    expect(newReplicaId("meta-llama/Llama-3.1-8B-Instruct", () => 0.5)).toBe("fl-meta-llama-llama-3.1-8b-instruct-iiiiii");
    const big = buildReplicaRecord(
      spec({ engine: "vllm", tensor_parallel: 8, nodes_per_replica: 2, quantization: "fp8" }),
      [
        { node: "n1", gpus: [0, 1, 2, 3, 4, 5, 6, 7] },
        { node: "n2", gpus: [0, 1, 2, 3, 4, 5, 6, 7] },
      ],
      "fl-m-bbbbbb",
      5,
      (n) => (n === "n1" ? "10.0.0.1" : "10.0.0.2"),
    );
    expect(big.shards.map((s) => [s.agentId, s.rank, s.spec.multiNode])).toEqual([
      ["fl-m-bbbbbb.r0", 0, { nnodes: 2, nodeRank: 0, masterAddr: "10.0.0.1", masterPort: 29500 }],
      ["fl-m-bbbbbb.r1", 1, { nnodes: 2, nodeRank: 1, masterAddr: "10.0.0.1", masterPort: 29500 }],
    ]);
    expect(big.shards[0]!.spec).toMatchObject({ engine: "vllm", tensorParallel: 8, pipelineParallel: 2, quantization: "fp8" });
    expect(replicaIdOf("fl-m-bbbbbb.r1")).toBe("fl-m-bbbbbb");
    expect(replicaIdOf("manual.r1")).toBe("manual.r1");
  });
});

describe("desired models: config vs store", () => {
  const stored = (over: Record<string, unknown>, source: "config" | "api", hash: string | null) => ({
    spec: spec(over),
    source,
    configHash: hash,
    updatedAt: 0,
  });
  test("an API change survives a restart; a changed config entry wins; a model gone from the config goes", () => {
    const cfgA = spec({ name: "a", replicas: 2 });
    const cfgB = spec({ name: "b", replicas: 1 });
    const changes = configModelChanges(
      [cfgA, cfgB],
      [
        stored({ name: "a", replicas: 5 }, "config", specHash(cfgA)),
        stored({ name: "b", replicas: 3 }, "config", "old-hash"),
        stored({ name: "gone" }, "config", "x"),
        stored({ name: "api-made" }, "api", null),
      ],
      9,
    );
    expect(changes.map((c) => (c.kind === "put" ? `put ${c.model.spec.name} ${c.model.spec.replicas}` : `delete ${c.name}`))).toEqual([
      "put b 1",
      "delete gone",
    ]);
    expect(configModelChanges([cfgA], [], 9)).toEqual([
      { kind: "put", model: { spec: cfgA, source: "config", configHash: specHash(cfgA), updatedAt: 9 }, note: "new in the config" },
    ]);
  });
});

describe("fleet config keys", () => {
  const issues = (raw: Record<string, unknown>, env: Record<string, string> = {}) => {
    try {
      buildConfig(raw, env);
      return [];
    } catch (err) {
      if (err instanceof ConfigError) return [...err.issues];
      throw err;
    }
  };
  test("defaults, token_env resolution and validated models", () => {
    const c = buildConfig(
      {
        nodes: [{ name: "n1", url: "http://10.0.0.1:7070/", token_env: "N1_TOKEN" }],
        fleet: { models: [{ name: "m", engine: "vllm", replicas: 2, tensor_parallel: 4 }] },
      },
      { N1_TOKEN: "secret" },
    );
    expect(c.dataDir).toBe("./.llmgw-data");
    expect(c.nodes).toEqual([{ name: "n1", url: "http://10.0.0.1:7070", token: "secret", dcgmUrl: undefined }]);
    expect(c.fleet.models[0]).toMatchObject({ name: "m", engine: "vllm", replicas: 2, tensorParallel: 4, nodesPerReplica: 1, pool: "default", engineArgs: [] });
    expect(c.fleet).toMatchObject({ nodeNotReadyAfterMs: 10_000, drainGraceMs: 120_000, adminToken: undefined });
  });

  test("bad keys name their path", () => {
    expect(issues({ nodes: [{ name: "n1", url: "ftp://x", token: "t" }] })).toEqual(["nodes[0].url: expected an http(s) URL"]);
    expect(issues({ nodes: [{ name: "n1", url: "http://x:1" }] })).toEqual(["nodes[0]: expected exactly one of token or token_env"]);
    expect(issues({ nodes: [{ name: "n1", url: "http://x:1", token_env: "MISSING" }] })).toEqual([
      "nodes[0].token_env: environment variable MISSING is not set",
    ]);
    expect(
      issues({
        nodes: [
          { name: "n", url: "http://x:1", token: "t" },
          { name: "n", url: "http://y:1", token: "t" },
        ],
      }),
    ).toEqual(["nodes[1].name: duplicate node 'n' (also nodes[0])"]);
    expect(issues({ fleet: { models: [{ name: "--port", engine: "vllm", replicas: 1 }] } })[0]).toStartWith("fleet.models[0].name: expected a model name");
    expect(issues({ fleet: { models: [{ name: "m", engine: "vllm", replicas: 1, startup_ms: 5 }] } })).toEqual([
      "fleet.models[0].startup_ms: applies to engine sim only",
    ]);
    expect(issues({ fleet: { models: [{ name: "m", engine: "tgi", replicas: 1 }] } })[0]).toStartWith("fleet.models[0].engine:");
    expect(issues({ fleet: { admin_token: "short" } })).toEqual(["fleet.admin_token: expected at least 16 characters"]);
    expect(issues({ fleet: { agent_poll_interval_ms: 5000, node_not_ready_after_ms: 4000 } })).toEqual([
      "fleet.node_not_ready_after_ms: expected more than fleet.agent_poll_interval_ms (5000)",
    ]);
  });
});
