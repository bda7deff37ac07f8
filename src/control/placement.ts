/**
 * Placement, a pure function over plain data. Every candidate — a node and
 * a GPU set on it, one per GPU class the node has (plus a mixed set when no
 * single class suffices) — is chosen, eligible or rejected with every reason
 * that applies, so `ctl explain-placement` can name them all.
 *
 * Policy, deterministic: replicas of one model spread across nodes first
 * (fewest replicas of the model on the node), then pack (the node left with
 * the fewest free GPUs wins, keeping whole nodes free for large models), then
 * node name, then lowest GPU index (src/control/placement-score.ts). Replicas are placed one at a time, each
 * seeing the GPUs taken by the ones before it. A replica spanning nodes takes
 * that many distinct eligible nodes sharing one fabric transport.
 */
import { candidateScore, compareCandidates, decide } from "./placement-score.ts";
import type {
  Candidate,
  ChosenShard,
  PlacementDecision,
  PlacementGpu,
  PlacementNode,
  PlacementRequest,
  PlacementResult,
  Rejection,
} from "./placement-types.ts";

/** fp8 weights need compute capability 8.9 (Ada, Hopper); engines fall back to a slower path below it. */
const FP8_MIN_COMPUTE_CAPABILITY: readonly [number, number] = [8, 9];

function isFp8(quantization: string | undefined): boolean {
  return quantization !== undefined && /fp8/i.test(quantization);
}

/** Whether "9.0" ≥ major.minor; an unknown capability is not (refuse rather than guess). */
function capabilityAtLeast(cc: string | null, [major, minor]: readonly [number, number]): boolean {
  const m = cc === null ? null : /^(\d+)\.(\d+)$/.exec(cc.trim());
  if (!m) return false;
  const [a, b] = [Number(m[1]), Number(m[2])];
  return a > major || (a === major && b >= minor);
}

function list(gpus: readonly PlacementGpu[]): string {
  return gpus.map((g) => g.index).join(", ");
}

/** Rules on the GPUs' kind (class, memory, compute capability): the same for any set of that kind. */
function kindRejections(req: PlacementRequest, gpus: readonly PlacementGpu[]): Rejection[] {
  const out: Rejection[] = [];
  const classes = [...new Set(gpus.map((g) => g.class))];
  if (req.gpuClass !== undefined && classes.some((c) => c !== req.gpuClass)) {
    out.push({ code: "wrong-gpu-class", message: `GPU class ${classes.join(", ")}; the model asks for ${req.gpuClass}` });
  }
  if (req.minGpuMemoryGiB !== undefined) {
    const small = gpus.filter((g) => g.memoryGiB === null || g.memoryGiB < req.minGpuMemoryGiB!);
    if (small.length > 0) {
      const have = [...new Set(small.map((g) => (g.memoryGiB === null ? "unknown" : `${g.memoryGiB} GiB`)))].join(", ");
      out.push({ code: "too-little-memory", message: `GPU memory ${have}; the model needs at least ${req.minGpuMemoryGiB} GiB per GPU` });
    }
  }
  if (isFp8(req.quantization)) {
    const weak = gpus.filter((g) => !capabilityAtLeast(g.computeCapability, FP8_MIN_COMPUTE_CAPABILITY));
    if (weak.length > 0) {
      const have = [...new Set(weak.map((g) => g.computeCapability ?? "unknown"))].join(", ");
      out.push({ code: "fp8-compute-capability", message: `quantization ${req.quantization} needs compute capability ≥ 8.9; these GPUs have ${have}` });
    }
  }
  return out;
}

function nodeRejections(req: PlacementRequest, node: PlacementNode): Rejection[] {
  const out: Rejection[] = [];
  if (node.cordoned) out.push({ code: "cordoned", message: "the node is cordoned: no new replicas" });
  if (node.state !== "Ready")
    out.push({ code: "node-not-ready", message: node.state === "Unknown" ? "the agent has not answered yet" : "the agent stopped answering (NotReady)" });
  if (req.nodesPerReplica > 1 && (node.transports === null || node.transports.length === 0)) {
    out.push({ code: "no-shared-fabric", message: `a replica spans ${req.nodesPerReplica} nodes; this node has no active InfiniBand or RoCE port` });
  }
  return out;
}

function faultSummary(gpus: readonly PlacementGpu[]): string {
  return gpus.map((g) => `GPU ${g.index}: ${g.faults.join("; ")}`).join("; ");
}

/** The count rules for one group of GPUs: enough free ones, and if not, whether faults are why. */
function countRejections(req: PlacementRequest, group: readonly PlacementGpu[], label: string): { rejections: Rejection[]; usable: PlacementGpu[] } {
  const n = req.tensorParallel;
  const free = group.filter((g) => g.usedBy === null);
  const usable = free.filter((g) => g.faults.length === 0);
  const faulted = free.filter((g) => g.faults.length > 0);
  if (usable.length >= n) return { rejections: [], usable };
  const used = group.filter((g) => g.usedBy !== null);
  const usedText = used.length > 0 ? `; in use: ${used.map((g) => `GPU ${g.index} by ${g.usedBy}`).join(", ")}` : "";
  if (usable.length + faulted.length >= n) {
    return {
      rejections: [{ code: "gpu-unhealthy", message: `needs ${n} healthy free ${label} GPU(s), ${usable.length} healthy: ${faultSummary(faulted)}` }],
      usable,
    };
  }
  const faultText = faulted.length > 0 ? `; unhealthy: ${faultSummary(faulted)}` : "";
  return {
    rejections: [{ code: "too-few-free-gpus", message: `needs ${n} free ${label} GPU(s), ${usable.length} free of ${group.length}${usedText}${faultText}` }],
    usable,
  };
}

/** Every candidate on one node, evaluated. Eligible ones carry their GPU set; `rank` is filled in later. */
function nodeCandidates(req: PlacementRequest, node: PlacementNode): Candidate[] {
  const base = nodeRejections(req, node);
  if (node.gpus.length === 0) {
    return [
      {
        node: node.name,
        gpus: [],
        gpuClass: null,
        verdict: "rejected",
        rank: null,
        score: null,
        reasons: [...base, { code: "too-few-free-gpus", message: `needs ${req.tensorParallel} free GPU(s); the node has none` }],
      },
    ];
  }
  const classes = [...new Set(node.gpus.map((g) => g.class))].sort();
  const out: Candidate[] = [];
  let anyClassSuffices = false;
  for (const cls of classes) {
    const group = node.gpus.filter((g) => g.class === cls).sort((a, b) => a.index - b.index);
    const { rejections, usable } = countRejections(req, group, cls);
    if (rejections.length === 0) anyClassSuffices = true;
    const chosen = usable.slice(0, req.tensorParallel);
    const reasons = [...base, ...kindRejections(req, group), ...rejections];
    out.push({
      node: node.name,
      gpus: (chosen.length > 0 ? chosen : group).map((g) => g.index),
      gpuClass: cls,
      verdict: reasons.length === 0 ? "eligible" : "rejected",
      rank: null,
      score: null,
      reasons,
    });
  }
  // A tensor-parallel group needs one GPU type: enough free GPUs only across classes is its own rejection.
  const usableAll = node.gpus.filter((g) => g.usedBy === null && g.faults.length === 0).sort((a, b) => a.index - b.index);
  if (!anyClassSuffices && classes.length > 1 && usableAll.length >= req.tensorParallel) {
    const set = usableAll.slice(0, req.tensorParallel);
    out.push({
      node: node.name,
      gpus: set.map((g) => g.index),
      gpuClass: null,
      verdict: "rejected",
      rank: null,
      score: null,
      reasons: [
        ...base,
        { code: "mixed-gpu-types", message: `GPUs ${list(set)} are ${set.map((g) => g.class).join(", ")}: a tensor-parallel group needs one GPU type` },
      ],
    });
  }
  return out;
}

/** Pick the shards of one replica from ranked eligible candidates; a multi-node replica needs distinct nodes on one transport. */
function pickShards(req: PlacementRequest, ranked: readonly Candidate[], nodes: ReadonlyMap<string, PlacementNode>): ChosenShard[] | string {
  if (ranked.length === 0) return "no eligible candidate";
  if (req.nodesPerReplica === 1) return [{ node: ranked[0]!.node, gpus: ranked[0]!.gpus }];
  for (const transport of ["ib", "roce"] as const) {
    const picked: Candidate[] = [];
    for (const c of ranked) {
      if (picked.some((p) => p.node === c.node)) continue;
      if (!nodes.get(c.node)!.transports?.includes(transport)) continue;
      picked.push(c);
      if (picked.length === req.nodesPerReplica) return picked.map((p) => ({ node: p.node, gpus: p.gpus }));
    }
  }
  const distinct = new Set(ranked.map((c) => c.node)).size;
  return `a replica spans ${req.nodesPerReplica} nodes sharing one fabric (InfiniBand or RoCE); ${distinct} eligible node(s) found`;
}

/** The nodes after `shards` took their GPUs (and count one more replica of the model). */
function withPlacement(req: PlacementRequest, nodes: readonly PlacementNode[], shards: readonly ChosenShard[], label: string): PlacementNode[] {
  return nodes.map((n) => {
    const shard = shards.find((s) => s.node === n.name);
    if (!shard) return n;
    return {
      ...n,
      gpus: n.gpus.map((g) => (shard.gpus.includes(g.index) ? { ...g, usedBy: label } : g)),
      modelReplicas: { ...n.modelReplicas, [req.model]: (n.modelReplicas[req.model] ?? 0) + 1 },
    };
  });
}

export function place(req: PlacementRequest, nodesIn: readonly PlacementNode[]): PlacementResult {
  let nodes = [...nodesIn].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  let candidates: Candidate[] = [];
  const placements: ChosenShard[][] = [];
  let unplacedReason: string | null = null;
  let decision: PlacementDecision | null = null;
  for (let round = 0; round < req.count; round++) {
    const byName = new Map(nodes.map((n) => [n.name, n]));
    const all = nodes.flatMap((n) => nodeCandidates(req, n));
    const eligible = all.filter((c) => c.verdict === "eligible");
    for (const c of eligible) c.score = candidateScore(req, byName.get(c.node)!, c);
    const ranked = eligible.sort(compareCandidates);
    if (round === 0) {
      ranked.forEach((c, i) => (c.rank = i + 1));
      candidates = all;
      decision = decide(ranked);
    }
    const shards = pickShards(req, ranked, byName);
    if (typeof shards === "string") {
      unplacedReason = shards;
      break;
    }
    placements.push(shards);
    nodes = withPlacement(req, nodes, shards, `(new replica ${round + 1})`);
  }
  for (const c of candidates) {
    const chosen = placements.some((p) => p.some((s) => s.node === c.node && s.gpus.join() === c.gpus.join()));
    if (chosen && c.verdict === "eligible") c.verdict = "chosen";
  }
  return { candidates, placements, unplaced: req.count - placements.length, unplacedReason, decision };
}
