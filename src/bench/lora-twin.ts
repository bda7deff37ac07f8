/**
 * `llmgw bench lora --twin`: one policy of the LoRA bench in the fleet twin.
 * The same workload (the same requests at the same simulated times), the
 * same sim-engine flags and gateway config as the real-time run; each chat
 * body is parsed by the sim's own request parser (its rendered prompt, its
 * answer's natural length, its adapter), admitted and routed by the
 * gateway's own modules (adapters numbered, listed and routed to their base
 * as the health worker and the admission client do), and answered by the
 * sim-engine's core with its adapter slots. The figures are those of the
 * real-time run, in simulated time.
 */
import { TwinFleet } from "../twin/twin-fleet.ts";
import { LORA_POLICY_SCHEDULING, type LoraBenchOptions, type LoraPolicy, type LoraPolicyResult } from "./lora-policies.ts";
import { type LoraWorkload, loraSimArgs } from "./lora-workload.ts";
import { quantile } from "./report.ts";

/** Events run between two turns of the event loop. */
const EVENTS_PER_SLICE = 20_000;
/** After the last send, answers still open this much later (simulated ms) are aborted and count as errors. */
const DRAIN_MS = 600_000;

export async function runLoraPolicyTwin(
  w: LoraWorkload,
  policy: LoraPolicy,
  opts: Omit<LoraBenchOptions, "workload" | "policies">,
  seed = 1,
): Promise<LoraPolicyResult> {
  const scheduling = LORA_POLICY_SCHEDULING[policy];
  // The twin names each engine's model itself: the workload's --model pair is left out.
  const simArgs = loraSimArgs(w).slice(2);
  const fleet = new TwinFleet({
    engines: opts.replicas,
    model: w.options.base,
    engineFlags: [...simArgs, ...(opts.profile ? ["--profile", opts.profile] : [])],
    gateway: { log_level: "warn", ...(scheduling ? { scheduling } : {}) },
    kvEvents: false,
    seed,
  });
  const { clock, gateway, engines } = fleet;
  const ttfts: number[] = [];
  let measured = 0;
  let errors = 0;
  let open = 0;
  let sent = 0;
  let measureFrom = Number.NaN;
  let lastEnd = 0;
  let tokens0 = 0;
  let loads0 = 0;
  const aborts = new Set<() => void>();
  const generated = () => engines.reduce((n, e) => n + e.core.stats.generationTokens, 0);
  const gpuLoads = () => engines.reduce((n, e) => n + (e.lora ? Number(e.lora.state().gpu_loads) : 0), 0);

  const send = (i: number) => {
    const r = w.requests[i]!;
    const sentAt = clock.now;
    if (!r.warmup && Number.isNaN(measureFrom)) {
      measureFrom = sentAt;
      tokens0 = generated();
      loads0 = gpuLoads();
    }
    const counted = !r.warmup;
    if (counted) measured++;
    open++;
    const end = (ok: boolean, ttftMs?: number) => {
      open--;
      lastEnd = Math.max(lastEnd, clock.now);
      if (!counted) return;
      if (!ok || ttftMs === undefined) errors++;
      else ttfts.push(ttftMs);
    };
    const body = JSON.parse(r.body) as Record<string, unknown>;
    gateway.admit(gateway.keysOfBody(body, r.adapter), (a) => {
      if (!a.ok) return end(false);
      const engine = engines[a.index]!;
      let first = Number.NaN;
      let ended = false;
      const finish = (ok: boolean) => {
        if (ended) return;
        ended = true;
        aborts.delete(abort);
        // As its own event: the engine is still inside its step, and what the release lets flow may go to it.
        clock.at(clock.now, () => gateway.release(a));
        end(ok && !Number.isNaN(first), first - sentAt);
      };
      const { seqs } = engine.generate("chat", r.body, () => ({
        token: (_index, at) => {
          if (Number.isNaN(first)) {
            first = at;
            gateway.prefillDone(a);
          }
        },
        finish: () => finish(true),
      }));
      const abort = () => {
        for (const s of seqs) engine.core.abort(s, true, clock.now);
        finish(false);
      };
      aborts.add(abort);
    });
  };

  gateway.start();
  let next = 0;
  const sendDue = () => {
    while (next < w.requests.length && w.requests[next]!.atMs <= clock.now) {
      send(next++);
      sent++;
    }
    if (next < w.requests.length) clock.at(w.requests[next]!.atMs, sendDue);
  };
  if (w.requests.length > 0) clock.at(w.requests[0]!.atMs, sendDue);
  clock.at((w.requests.at(-1)?.atMs ?? 0) + DRAIN_MS, () => {
    for (const abort of [...aborts]) abort();
  });
  const over = () => sent === w.requests.length && open === 0;
  while (!over() && clock.size > 0) {
    let events = 0;
    clock.run(Infinity, () => over() || ++events > EVENTS_PER_SLICE);
    await new Promise<void>((r) => setImmediate(r));
  }
  gateway.stop();
  const loads = gpuLoads() - loads0;
  const tokens = generated() - tokens0;
  const simMs = lastEnd - (Number.isNaN(measureFrom) ? 0 : measureFrom);
  return {
    policy,
    requests: measured,
    errors,
    adapter_loads: loads,
    loads_per_1000: measured > 0 ? (loads / measured) * 1000 : 0,
    ttft_p50_ms: quantile(ttfts, 0.5),
    ttft_p90_ms: quantile(ttfts, 0.9),
    output_tokens: tokens,
    output_tok_per_s: simMs > 0 ? tokens / (simMs / 1000) : 0,
    duration_s: simMs / 1000,
  };
}
