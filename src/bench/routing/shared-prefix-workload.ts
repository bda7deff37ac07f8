/**
 * The `shared_prefix` workload of inference-perf (the generator llm-d's
 * routing experiments use), as a schedule for the open-loop driver. Pure:
 * a seed in, the same requests out.
 *
 * `groups` system prompts of `systemLen` tokens, each followed by
 * `perGroup` questions of `questionLen` tokens: groups × perGroup distinct
 * prompts, shuffled once, then sent in that order over and over (request i
 * carries prompt i mod the count), as inference-perf's generator does — so
 * a prompt comes back every groups × perGroup requests, and its question
 * may still be cached too. Arrivals are Poisson, stage after stage, each at
 * its own rate; a warm-up stage first.
 */
import type { ScheduledRequest } from "../replay/open-loop-driver.ts";
import type { PromptSegment } from "../replay/prompt-text.ts";

export interface Stage {
  /** Requests per second (of simulated time). */
  rate: number;
  /** Seconds (of simulated time). */
  durationS: number;
}

export interface SharedPrefixWorkload {
  groups: number;
  perGroup: number;
  systemLen: number;
  questionLen: number;
  outputLen: number;
  /** Stage 0 when present; its requests are sent but left out of the figures. */
  warmup?: Stage;
  stages: Stage[];
  seed: number;
}

interface WorkloadRequest extends ScheduledRequest {
  /** -1 for the warm-up, else the index into `stages`. */
  stage: number;
  group: number;
}

export interface WorkloadSchedule {
  requests: WorkloadRequest[];
  /** Start of each stage (of `stages`), ms of simulated time. */
  stageStartMs: number[];
  /** End of the last stage, ms. */
  endMs: number;
}

/** xorshift32: a small seeded generator (the same schedule for the same seed, in any process). */
export function seededRandom(seed: number): () => number {
  let s = seed >>> 0 || 0x9e3779b9;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 4_294_967_296;
  };
}

/** The prompt of group g's p-th question: the group's system prompt, then the question's own text. */
export function promptSegments(w: Pick<SharedPrefixWorkload, "systemLen" | "questionLen">, group: number, question: number): PromptSegment[] {
  return [
    { key: `system-${group}`, tokens: w.systemLen },
    { key: `question-${group}-${question}`, tokens: w.questionLen },
  ];
}

export function buildSchedule(w: SharedPrefixWorkload): WorkloadSchedule {
  const random = seededRandom(w.seed);
  const prompts = w.groups * w.perGroup;
  // Fisher–Yates: the prompts' fixed order, as inference-perf shuffles them once.
  const order = Array.from({ length: prompts }, (_, i) => i);
  for (let i = prompts - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  const requests: WorkloadRequest[] = [];
  const stageStartMs: number[] = [];
  let t = 0;
  const stages: [number, Stage][] = [...(w.warmup ? ([[-1, w.warmup]] as [number, Stage][]) : []), ...w.stages.map((s, k): [number, Stage] => [k, s])];
  for (const [index, stage] of stages) {
    if (index >= 0) stageStartMs.push(t);
    const end = t + stage.durationS * 1000;
    let at = t;
    for (;;) {
      // Exponential gaps: a Poisson process at the stage's rate.
      at += (-Math.log(1 - random()) / stage.rate) * 1000;
      if (at >= end) break;
      const prompt = order[requests.length % prompts]!;
      const group = Math.floor(prompt / w.perGroup);
      requests.push({ atMs: at, stage: index, group, segments: promptSegments(w, group, prompt % w.perGroup), maxTokens: w.outputLen });
    }
    t = end;
  }
  return { requests, stageStartMs, endMs: t };
}
