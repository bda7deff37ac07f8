/** Placement rule by rule, over literal nodes built from the shared nvidia-smi and DCGM captures. */
import { describe, expect, test } from "bun:test";
import { place } from "../../src/control/placement.ts";
import { gpuFaults } from "../../src/control/placement-inputs.ts";
import type { PlacementGpu, PlacementNode, PlacementRequest } from "../../src/control/placement-types.ts";
import { nextDcgmVerdicts } from "../../src/polling/agent-poller.ts";
import { agentGpus, placementGpus } from "../fixtures/fleet/gpus.ts";
import { sharedFixture } from "../helpers/fixtures.ts";

function node(name: string, gpus: PlacementGpu[], over: Partial<PlacementNode> = {}): PlacementNode {
  return { name, state: "Ready", cordoned: false, transports: [], gpus, modelReplicas: {}, ...over };
}

function req(over: Partial<PlacementRequest> = {}): PlacementRequest {
  return { model: "m", tensorParallel: 1, nodesPerReplica: 1, gpuClass: undefined, minGpuMemoryGiB: undefined, quantization: undefined, count: 1, ...over };
}

const used = (gpus: PlacementGpu[], indices: number[], by: string) => gpus.map((g) => (indices.includes(g.index) ? { ...g, usedBy: by } : g));

function codes(result: ReturnType<typeof place>, nodeName: string): string[] {
  return result.candidates.filter((c) => c.node === nodeName).flatMap((c) => c.reasons.map((r) => r.code));
}

describe("placement policy", () => {
  test("replicas of one model spread across nodes first, then pack; ties go by node name", () => {
    const nodes = [
      node("c", placementGpus("h100", 2, "c")),
      node("a", placementGpus("h100", 2, "a")),
      node("b", used(placementGpus("h100", 4, "b"), [3], "other")),
    ];
    const r = place(req({ count: 3 }), nodes);
    expect(r.placements.map((p) => p.map((s) => `${s.node}:${s.gpus.join(",")}`).join())).toEqual(["a:0", "c:0", "b:0"]);
    expect(r.unplaced).toBe(0);
    expect(r.candidates.map((c) => [c.node, c.verdict, c.rank])).toEqual([
      ["a", "chosen", 1],
      ["b", "chosen", 3],
      ["c", "chosen", 2],
    ]);
  });

  test("pack: the node left with the fewest free GPUs wins, keeping whole nodes free", () => {
    const r = place(req(), [node("empty", placementGpus("h200", 8, "e")), node("busy", used(placementGpus("h200", 8, "b"), [0, 1, 2, 3, 4, 5], "big"))]);
    expect(r.placements).toEqual([[{ node: "busy", gpus: [6] }]]);
    expect(r.candidates.find((c) => c.node === "empty")).toMatchObject({ verdict: "eligible", rank: 2 });
  });

  test("spread counts replicas already running on each node", () => {
    const r = place(req(), [node("a", placementGpus("h100", 2, "a"), { modelReplicas: { m: 1 } }), node("b", placementGpus("h100", 8, "b"))]);
    expect(r.placements[0]![0]!.node).toBe("b");
  });

  test("the result does not depend on the order nodes are given in", () => {
    const nodes = [node("x", placementGpus("h100", 2, "x")), node("y", placementGpus("h200", 2, "y")), node("z", placementGpus("h100", 4, "z"))];
    const one = place(req({ count: 4 }), nodes);
    const two = place(req({ count: 4 }), [...nodes].reverse());
    expect(two).toEqual(one);
  });
});

describe("placement explanation: each eligible candidate's score and the rule that ranked the winner first", () => {
  test("two eligible nodes, one wins on score (pack), with both scores given", () => {
    const r = place(req(), [node("roomy", placementGpus("h100", 8, "r")), node("tight", used(placementGpus("h100", 4, "t"), [0, 1], "other"))]);
    expect(r.candidates.map((c) => [c.node, c.verdict, c.rank, c.score])).toEqual([
      ["roomy", "eligible", 2, { modelReplicas: 0, freeGpusAfter: 7 }],
      ["tight", "chosen", 1, { modelReplicas: 0, freeGpusAfter: 1 }],
    ]);
    expect(r.decision).toEqual({ rule: "pack", winner: { node: "tight", gpus: [2] }, runnerUp: { node: "roomy", gpus: [0] } });
  });

  test("spread outranks pack: the node without a replica of the model wins though it keeps more GPUs free", () => {
    const r = place(req(), [node("has-one", placementGpus("h100", 2, "h"), { modelReplicas: { m: 1 } }), node("none", placementGpus("h100", 8, "n"))]);
    expect(r.decision).toMatchObject({ rule: "spread", winner: { node: "none" }, runnerUp: { node: "has-one" } });
  });

  test("two tied on score: the tie-break is named (node-name), and the same whatever the input order", () => {
    const nodes = [node("node-b", placementGpus("h100", 2, "b")), node("node-a", placementGpus("h100", 2, "a"))];
    const r = place(req(), nodes);
    expect(r.candidates.map((c) => c.score)).toEqual([
      { modelReplicas: 0, freeGpusAfter: 1 },
      { modelReplicas: 0, freeGpusAfter: 1 },
    ]);
    expect(r.decision).toEqual({ rule: "node-name", winner: { node: "node-a", gpus: [0] }, runnerUp: { node: "node-b", gpus: [0] } });
    expect(place(req(), [...nodes].reverse())).toEqual(r);
  });

  test("tied on one node across GPU classes: lowest-gpu decides", () => {
    const gpus = [...placementGpus("h100", 1, "x"), ...placementGpus("h200", 1, "y", 1)];
    const r = place(req(), [node("mixed", gpus)]);
    expect(r.decision).toMatchObject({ rule: "lowest-gpu", winner: { node: "mixed", gpus: [0] }, runnerUp: { node: "mixed", gpus: [1] } });
  });

  test("one eligible candidate is named as such; none eligible gives no decision and no scores", () => {
    expect(place(req(), [node("solo", placementGpus("h100", 1, "s"))]).decision).toMatchObject({ rule: "only-candidate", runnerUp: null });
    const none = place(req(), [node("full", used(placementGpus("h100", 1, "f"), [0], "other"))]);
    expect(none.decision).toBeNull();
    expect(none.candidates.every((c) => c.score === null)).toBe(true);
  });
});

describe("placement rejections, one rule at a time", () => {
  test("cordoned", () => {
    const r = place(req(), [node("a", placementGpus("h100", 2, "a"), { cordoned: true })]);
    expect(codes(r, "a")).toEqual(["cordoned"]);
    expect(r.unplacedReason).toBe("no eligible candidate");
  });

  test("NotReady, and Unknown before the first answer", () => {
    const r = place(req(), [
      node("gone", placementGpus("h100", 1, "g"), { state: "NotReady" }),
      node("new", placementGpus("h100", 1, "n"), { state: "Unknown" }),
    ]);
    expect(r.candidates.map((c) => [c.node, c.reasons.map((x) => x.message)])).toEqual([
      ["gone", ["the agent stopped answering (NotReady)"]],
      ["new", ["the agent has not answered yet"]],
    ]);
  });

  test("GPU unhealthy: MIG from the agent's inventory, XID and temperature from DCGM, each with its reason", () => {
    const t4 = sharedFixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt")
      .replace(/(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0/, "$1 79")
      .replace(/(DCGM_FI_DEV_GPU_TEMP\{[^}]*\}) 25/, "$1 93");
    const dcgm = nextDcgmVerdicts(undefined, { ok: true, status: 200, body: t4 }, 1_000, { staleAfterMs: 5_000 });
    const h100 = agentGpus("h100", 2, "d");
    const fromDcgm: PlacementGpu[] = h100.map((g) => ({
      index: g.index,
      uuid: g.uuid,
      class: g.class,
      memoryGiB: g.memoryTotalGiB,
      computeCapability: g.computeCapability,
      faults: gpuFaults(g, dcgm),
      usedBy: null,
    }));
    const r = place(req({ tensorParallel: 2 }), [node("mig", placementGpus("h100-mig", 2, "m")), node("xid", fromDcgm)]);
    expect(codes(r, "mig")).toEqual(["gpu-unhealthy"]);
    expect(r.candidates.find((c) => c.node === "mig")!.reasons[0]!.message).toContain("GPU 0: MIG mode is enabled");
    const xid = r.candidates.find((c) => c.node === "xid")!;
    expect(xid.reasons.map((x) => x.code)).toEqual(["gpu-unhealthy"]);
    expect(xid.reasons[0]!.message).toBe(
      "needs 2 healthy free h100-80g GPU(s), 1 healthy: GPU 0: DCGM: xid 79: GPU has fallen off the bus; DCGM: temperature 93 C >= 90 C",
    );
  });

  test("a stale DCGM scrape is no evidence: the GPU stays usable", () => {
    const t4 = sharedFixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt").replace(/(DCGM_FI_DEV_XID_ERRORS\{[^}]*\}) 0/, "$1 79");
    const fresh = nextDcgmVerdicts(undefined, { ok: true, status: 200, body: t4 }, 1_000, { staleAfterMs: 5_000 });
    const stale = nextDcgmVerdicts(fresh, { ok: false, status: undefined, error: "timed out", timedOut: true }, 10_000, { staleAfterMs: 5_000 });
    const g = agentGpus("h100", 1, "s")[0]!;
    expect(gpuFaults(g, fresh)).toEqual(["DCGM: xid 79: GPU has fallen off the bus"]);
    expect(stale.stale).toBe(true);
    expect(gpuFaults(g, stale)).toEqual([]);
  });

  test("too few free GPUs, naming what holds the others", () => {
    const r = place(req({ tensorParallel: 4 }), [
      node("a", used(placementGpus("h100", 4, "a"), [1, 2], "fl-x-abc")),
      node("small", placementGpus("h100", 2, "s")),
    ]);
    expect(codes(r, "a")).toEqual(["too-few-free-gpus"]);
    expect(r.candidates.find((c) => c.node === "a")!.reasons[0]!.message).toBe(
      "needs 4 free h100-80g GPU(s), 2 free of 4; in use: GPU 1 by fl-x-abc, GPU 2 by fl-x-abc",
    );
    expect(codes(r, "small")).toEqual(["too-few-free-gpus"]);
    expect(place(req(), [node("none", [])]).candidates[0]!.reasons[0]!.message).toBe("needs 1 free GPU(s); the node has none");
  });

  test("wrong GPU class", () => {
    const r = place(req({ gpuClass: "h200-140g" }), [node("h100", placementGpus("h100", 2, "a")), node("h200", placementGpus("h200", 2, "b"))]);
    expect(codes(r, "h100")).toEqual(["wrong-gpu-class"]);
    expect(r.placements[0]![0]!.node).toBe("h200");
  });

  test("too little memory (GiB as the driver reports it)", () => {
    const r = place(req({ minGpuMemoryGiB: 100 }), [node("h100", placementGpus("h100", 1, "a")), node("h200", placementGpus("h200", 1, "b"))]);
    expect(r.candidates.find((c) => c.node === "h100")!.reasons).toEqual([
      { code: "too-little-memory", message: "GPU memory 79.65 GiB; the model needs at least 100 GiB per GPU" },
    ]);
    expect(r.placements[0]![0]!.node).toBe("h200");
  });

  test("mixed GPU types: enough GPUs only across classes is rejected as such", () => {
    const mixed = [...placementGpus("h100", 1, "a"), ...placementGpus("h200", 1, "b", 1)];
    const r = place(req({ tensorParallel: 2 }), [node("mixed", mixed)]);
    expect(r.candidates.map((c) => [c.gpuClass, c.gpus, c.reasons.map((x) => x.code)])).toEqual([
      ["h100-80g", [0], ["too-few-free-gpus"]],
      ["h200-140g", [1], ["too-few-free-gpus"]],
      [null, [0, 1], ["mixed-gpu-types"]],
    ]);
    expect(r.candidates[2]!.reasons[0]!.message).toBe("GPUs 0, 1 are h100-80g, h200-140g: a tensor-parallel group needs one GPU type");
  });

  test("fp8 below compute capability 8.9 (an unknown capability is refused too)", () => {
    const unknownCc = placementGpus("h100", 1, "u").map((g) => ({ ...g, computeCapability: null }));
    const r = place(req({ quantization: "fp8" }), [
      node("turing", placementGpus("rtx2080", 1, "t")),
      node("unknown", unknownCc),
      node("hopper", placementGpus("h100", 1, "h")),
    ]);
    expect(r.candidates.find((c) => c.node === "turing")!.reasons).toEqual([
      { code: "fp8-compute-capability", message: "quantization fp8 needs compute capability ≥ 8.9; these GPUs have 7.5" },
    ]);
    expect(codes(r, "unknown")).toEqual(["fp8-compute-capability"]);
    expect(r.placements[0]![0]!.node).toBe("hopper");
    expect(codes(place(req({ quantization: "awq" }), [node("turing", placementGpus("rtx2080", 1, "t"))]), "turing")).toEqual([]);
  });

  test("multi-node without a shared fabric", () => {
    const island = place(req({ tensorParallel: 2, nodesPerReplica: 2 }), [
      node("a", placementGpus("h100", 2, "a")),
      node("b", placementGpus("h100", 2, "b"), { transports: null }),
    ]);
    expect(codes(island, "a")).toEqual(["no-shared-fabric"]);
    expect(codes(island, "b")).toEqual(["no-shared-fabric"]);
    const mixedFabric = place(req({ tensorParallel: 2, nodesPerReplica: 2 }), [
      node("ib", placementGpus("h100", 2, "a"), { transports: ["ib"] }),
      node("roce", placementGpus("h100", 2, "b"), { transports: ["roce"] }),
    ]);
    expect(mixedFabric.unplacedReason).toBe("a replica spans 2 nodes sharing one fabric (InfiniBand or RoCE); 2 eligible node(s) found");
    const ok = place(req({ tensorParallel: 2, nodesPerReplica: 2 }), [
      node("n2", placementGpus("h200", 2, "a"), { transports: ["ib"] }),
      node("n1", placementGpus("h200", 4, "b"), { transports: ["ib", "roce"] }),
    ]);
    expect(ok.placements).toEqual([
      [
        { node: "n2", gpus: [0, 1] },
        { node: "n1", gpus: [0, 1] },
      ],
    ]);
  });

  test("a model that fits nowhere names every node with all of its reasons", () => {
    const r = place(req({ tensorParallel: 2, gpuClass: "h200-140g", quantization: "fp8" }), [
      node("a", placementGpus("rtx2080", 2, "a"), { cordoned: true }),
      node("b", placementGpus("h200", 2, "b"), { state: "NotReady" }),
      node("c", used(placementGpus("h200", 2, "c"), [0], "fl-y")),
    ]);
    expect(r.placements).toEqual([]);
    expect(r.unplaced).toBe(1);
    expect(r.candidates.map((c) => [c.node, c.verdict, c.reasons.map((x) => x.code)])).toEqual([
      ["a", "rejected", ["cordoned", "wrong-gpu-class", "fp8-compute-capability"]],
      ["b", "rejected", ["node-not-ready"]],
      ["c", "rejected", ["too-few-free-gpus"]],
    ]);
  });
});
