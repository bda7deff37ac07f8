/**
 * One engine step's schedule, the way vLLM's V1 scheduler builds it (pure;
 * vllm/v1/core/sched/scheduler.py, Scheduler.schedule):
 *
 * 1. The running requests, in the order they were admitted, each get what
 *    they still need — one token for a decode, the rest of the prompt for a
 *    partial prefill — capped by what is left of max_num_batched_tokens.
 *    When the KV cache cannot hold a request's new tokens, the newest running
 *    request is preempted (recompute: its blocks are freed and it goes back
 *    to the head of the waiting queue), until the request fits or is itself
 *    the one preempted, which ends this pass.
 * 2. If nobody was preempted, waiting requests are admitted in arrival order
 *    while the budget lasts and fewer than max_num_seqs run: cached prefix
 *    blocks first, then a prefill chunk of at most the remaining budget
 *    (chunked prefill is always on in V1). A request whose chunk's blocks do
 *    not fit stops admission: nobody overtakes it.
 *
 * 3. With LoRA (maxLoras > 0), a step holds at most max_loras distinct
 *    adapters: a waiting request whose adapter would be one too many is
 *    skipped — others may overtake it — and goes back to the head of the
 *    queue afterwards (vLLM: `scheduled_loras`, `skipped_waiting_requests`).
 *
 * 4. Under async scheduling (`readyBy`), only requests that reached the engine
 *    by then are admitted: vLLM planned this step while the one before it ran,
 *    so a request that arrived meanwhile waits for the next.
 *
 * Not modelled: priorities, speculative decoding, encoder inputs, KV
 * transfer.
 */
import type { KvCache } from "./kv-cache.ts";
import type { Sequence } from "./sequence.ts";
import { emptyComposition, type StepComposition } from "./step-time.ts";
import type { WaitQueue } from "./wait-queue.ts";

interface PlannerLimits {
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  blockSize: number;
  /** Distinct LoRA adapters one step may hold (vLLM's max_loras); absent or 0: LoRA off. */
  maxLoras?: number;
}

export interface StepPlan {
  /** Sequences scheduled, with the tokens each computes (parallel arrays). */
  seqs: Sequence[];
  tokens: number[];
  /** Sequences preempted while planning (already back in the waiting queue, blocks freed). */
  preempted: Sequence[];
  /** Sequences admitted from the waiting queue (now at the end of `running`). */
  admitted: Sequence[];
  composition: StepComposition;
}

/** The hooks the planner needs from the engine: preemption changes its counts. */
export interface PlannerHost {
  /** Take `victim` out of the batch and put it back at the head of the waiting queue. */
  preempt(victim: Sequence): void;
  /** `s` left the waiting queue for the batch, `hitTokens` of its tokens found in the prefix cache. */
  admit(s: Sequence, hitTokens: number): void;
}

function addToComposition(c: StepComposition, s: Sequence, n: number): void {
  c.seqs++;
  c.tokens += n;
  const start = s.computed;
  if (n === 1 && start >= s.req.prompt.count) {
    c.decodeSeqs++;
    c.decodeContext += start + 1;
  } else {
    c.prefillSeqs++;
    c.prefillTokens += n;
    c.prefillContext += start + n;
    // Σ_{i=1..n} (start + i): each new token attends to everything before it and itself.
    c.prefillPairs += n * start + (n * (n + 1)) / 2;
  }
}

/** The last running sequence other than those already scheduled ahead of the cursor: vLLM pops self.running. */
function lastPreemptible(running: Sequence[], from: number): number {
  for (let i = running.length - 1; i >= from; i--) {
    const p = running[i]!.phase;
    if (p === "running" || p === "stalled" || p === "prefilled") return i;
  }
  return -1;
}

/** The adapters of the running requests this step scheduled (vLLM's `scheduled_loras`); undefined with LoRA off. */
function scheduledAdapters(scheduled: readonly Sequence[], maxLoras: number): Set<number> | undefined {
  if (maxLoras <= 0) return undefined;
  const ids = new Set<number>();
  for (const s of scheduled) if (s.req.adapter) ids.add(s.req.adapter.id);
  return ids;
}

export function planStep(running: Sequence[], waiting: WaitQueue, kv: KvCache, limits: PlannerLimits, host: PlannerHost, readyBy = Infinity): StepPlan {
  const plan: StepPlan = { seqs: [], tokens: [], preempted: [], admitted: [], composition: emptyComposition() };
  const bs = limits.blockSize;
  let budget = limits.maxNumBatchedTokens;
  let live = 0;
  for (const s of running) if (s.phase !== "done" && s.phase !== "waiting") live++;

  // 1. Running requests, in admission order.
  for (let i = 0; i < running.length && budget > 0; i++) {
    const s = running[i]!;
    if (s.phase !== "running") continue;
    const n = Math.min(s.totalTokens - s.computed, budget);
    if (n <= 0) continue;
    let need = kv.blocksFor(s.computed + n) - s.blocks.length;
    let selfPreempted = false;
    while (need > 0) {
      const b = kv.grow();
      if (b >= 0) {
        s.blocks.push(b);
        need--;
        continue;
      }
      const v = lastPreemptible(running, i);
      const victim = v >= 0 ? running[v]! : s;
      host.preempt(victim);
      plan.preempted.push(victim);
      live--;
      if (victim === s) {
        selfPreempted = true;
        break;
      }
    }
    if (selfPreempted) break;
    plan.seqs.push(s);
    plan.tokens.push(n);
    addToComposition(plan.composition, s, n);
    budget -= n;
  }

  // 2. Waiting requests, only when nobody was preempted (vLLM: `if not preempted_reqs`).
  if (plan.preempted.length === 0) {
    const maxLoras = limits.maxLoras ?? 0;
    const loras = scheduledAdapters(plan.seqs, maxLoras);
    const skipped: Sequence[] = [];
    while (budget > 0 && live < limits.maxNumSeqs) {
      const s = waiting.peek();
      if (!s || s.readyAt > readyBy) break;
      const adapter = s.req.adapter;
      if (loras && adapter && loras.size >= maxLoras && !loras.has(adapter.id)) {
        waiting.shift();
        skipped.push(s);
        continue;
      }
      // At least one token is always computed, so a full hit still samples (vLLM caps hits at num_tokens - 1).
      // A resumed request looks its generated blocks up too.
      const hits = s.computed === 0 ? kv.lookupPrefix(s.blockHashes, Math.floor((s.totalTokens - 1) / bs)) : [];
      const hitTokens = hits.length * bs;
      const n = Math.min(s.totalTokens - hitTokens, budget);
      const blocks = kv.allocateAfter(hits, kv.blocksFor(hitTokens + n) - hits.length);
      if (!blocks) break;
      waiting.shift();
      s.blocks = blocks;
      s.computed = hitTokens;
      if (s.scheduledAt < 0) s.cachedTokens = hitTokens;
      host.admit(s, hitTokens);
      plan.admitted.push(s);
      live++;
      plan.seqs.push(s);
      plan.tokens.push(n);
      addToComposition(plan.composition, s, n);
      budget -= n;
      if (loras && adapter) loras.add(adapter.id);
    }
    // Skipped requests keep their places at the head of the queue, in order.
    for (let i = skipped.length - 1; i >= 0; i--) waiting.unshift(skipped[i]!);
  }
  plan.composition.running = live;
  return plan;
}
