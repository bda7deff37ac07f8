/** Plain data in and out of placement (src/control/placement.ts): nodes, GPUs, the request, candidates and their verdicts. */
import type { NodeState } from "./types.ts";

export interface PlacementGpu {
  index: number;
  uuid: string;
  /** The agent's class: family + GiB the driver reports (e.g. h100-80g). */
  class: string;
  memoryGiB: number | null;
  /** "9.0"; null when the driver did not say. */
  computeCapability: string | null;
  /** Why the GPU may not take a replica (agent health flags, DCGM verdicts); empty when healthy. */
  faults: string[];
  /** The replica holding it (ours or not), or null when free. */
  usedBy: string | null;
}

export interface PlacementNode {
  name: string;
  state: NodeState;
  cordoned: boolean;
  /** Active fabric transports; [] = a single-node island; null = not known (no answer yet). */
  transports: ("ib" | "roce")[] | null;
  gpus: PlacementGpu[];
  /** Replicas of each model already on the node (spread input). */
  modelReplicas: Readonly<Record<string, number>>;
}

export interface PlacementRequest {
  model: string;
  /** GPUs per node of one replica. */
  tensorParallel: number;
  nodesPerReplica: number;
  gpuClass: string | undefined;
  minGpuMemoryGiB: number | undefined;
  quantization: string | undefined;
  /** Replicas to place. */
  count: number;
}

/** Why a candidate was rejected: a closed set, the code doubles as a label. */
export const REJECTION_CODES = [
  "cordoned",
  "node-not-ready",
  "gpu-unhealthy",
  "too-few-free-gpus",
  "wrong-gpu-class",
  "too-little-memory",
  "mixed-gpu-types",
  "fp8-compute-capability",
  "no-shared-fabric",
] as const;
type RejectionCode = (typeof REJECTION_CODES)[number];

export interface Rejection {
  code: RejectionCode;
  message: string;
}

export interface Candidate {
  node: string;
  /** The GPU set considered (the lowest free indices of one class; all free GPUs for a mixed set). */
  gpus: number[];
  /** null for a mixed set or a node without GPUs. */
  gpuClass: string | null;
  verdict: "chosen" | "eligible" | "rejected";
  reasons: Rejection[];
  /** Position among the eligible candidates of the first round (1 = preferred); null when rejected. */
  rank: number | null;
  /** What the policy compared, for an eligible or chosen candidate; null when rejected. */
  score: CandidateScore | null;
}

/** Score components, lower is better in each, compared in order (src/control/placement-score.ts). */
export interface CandidateScore {
  /** Replicas of the model already on the node (spread). */
  modelReplicas: number;
  /** Healthy free GPUs the node would have left after this placement (pack). */
  freeGpusAfter: number;
}

/** The rules in the order they are applied; the last two are tie-breaks. `only-candidate`: nothing to compare. */
export const PLACEMENT_RULES = ["spread", "pack", "node-name", "lowest-gpu", "only-candidate"] as const;
export type PlacementRule = (typeof PLACEMENT_RULES)[number];

/** Why the first-ranked candidate of the first round won over the second. */
export interface PlacementDecision {
  rule: PlacementRule;
  winner: ChosenShard;
  runnerUp: ChosenShard | null;
}

export interface ChosenShard {
  node: string;
  gpus: number[];
}

export interface PlacementResult {
  /** Every candidate of the first round, chosen, eligible or rejected with its reasons. */
  candidates: Candidate[];
  /** One entry per placed replica, its shards in rank order. */
  placements: ChosenShard[][];
  /** Replicas that found no place. */
  unplaced: number;
  /** Why the first unplaced replica found none; null when all were placed. */
  unplacedReason: string | null;
  /** The rule that ranked the first-round winner ahead of the runner-up; null when nothing was eligible. */
  decision: PlacementDecision | null;
}
