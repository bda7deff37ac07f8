/** The placement policy's order as data: each eligible candidate's score components, and the rule that put the winner ahead of the runner-up. */
import type { Candidate, CandidateScore, PlacementDecision, PlacementNode, PlacementRequest, PlacementRule } from "./placement-types.ts";

function usableFree(node: PlacementNode): number {
  return node.gpus.filter((g) => g.usedBy === null && g.faults.length === 0).length;
}

/** Lower is better in each component; the policy compares them in order, not as a sum, so no weight can trade one for another. */
export function candidateScore(req: PlacementRequest, node: PlacementNode, candidate: Candidate): CandidateScore {
  return { modelReplicas: node.modelReplicas[req.model] ?? 0, freeGpusAfter: usableFree(node) - candidate.gpus.length };
}

/** The first rule on which `a` and `b` differ, with its sign (negative: `a` first); null for the same node and GPU set. */
function firstDifference(a: Candidate, b: Candidate): { rule: PlacementRule; sign: number } | null {
  const sa = a.score!;
  const sb = b.score!;
  const steps: [PlacementRule, number][] = [
    ["spread", sa.modelReplicas - sb.modelReplicas],
    ["pack", sa.freeGpusAfter - sb.freeGpusAfter],
    // Node names are unique, so the tie-break is total: the same inputs give the same winner on every gateway.
    ["node-name", a.node === b.node ? 0 : a.node < b.node ? -1 : 1],
    ["lowest-gpu", (a.gpus[0] ?? 0) - (b.gpus[0] ?? 0)],
  ];
  for (const [rule, d] of steps) if (d !== 0) return { rule, sign: d };
  return null;
}

/** Policy order over scored eligible candidates: spread, pack, then the tie-breaks (node name, lowest GPU index). */
export function compareCandidates(a: Candidate, b: Candidate): number {
  return firstDifference(a, b)?.sign ?? 0;
}

/** Why the first-ranked candidate won: the rule that separated it from the second (ranked is in policy order). */
export function decide(ranked: readonly Candidate[]): PlacementDecision | null {
  const [winner, runnerUp] = ranked;
  if (!winner) return null;
  const shard = (c: Candidate) => ({ node: c.node, gpus: c.gpus });
  if (!runnerUp) return { rule: "only-candidate", winner: shard(winner), runnerUp: null };
  return { rule: firstDifference(winner, runnerUp)?.rule ?? "lowest-gpu", winner: shard(winner), runnerUp: shard(runnerUp) };
}
