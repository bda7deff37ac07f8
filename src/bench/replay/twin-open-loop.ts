/**
 * The open-loop load of the real-time benches (open-loop-driver.ts), sent
 * to a fleet twin (src/twin/) instead of a gateway: each request at its
 * scheduled time on the virtual clock, its prompt built from the same
 * segments, admitted and routed by the gateway's own modules, answered by
 * the sim-engine's core. The records have the real driver's shape, in
 * simulated milliseconds, so the same summaries read them.
 */

import { seededUnit } from "../../shared/seeded.ts";
import { type FaultOutcome, scheduleFaults } from "../../twin/fault-schedule.ts";
import type { TwinFault } from "../../twin/faults.ts";
import type { TwinFleet } from "../../twin/twin-fleet.ts";
import { TwinRequests } from "../../twin/twin-request.ts";
import { LogHistogram } from "./log-histogram.ts";
import type { OpenLoopProgress, OpenLoopResult, RequestRecord, ScheduledRequest } from "./open-loop-driver.ts";
import { PromptTextCache } from "./prompt-text.ts";

/** Events run between two turns of the event loop. */
const EVENTS_PER_SLICE = 20_000;
/** Progress is reported about this often, in simulated time. */
const PROGRESS_EVERY_SIM_MS = 5_000;

interface TwinOpenLoopOptions {
  /** In send order (atMs non-decreasing), simulated ms. */
  requests: readonly ScheduledRequest[];
  /** After the last send, answers still open this much later (simulated ms) are aborted and recorded as unfinished. */
  drainMs: number;
  /** Checked between events: true stops sending (what was sent is drained as at the end of a run). */
  stopped?: () => boolean;
  onProgress?: (p: OpenLoopProgress) => void;
  /** Faults applied to the engines and the gateway at their times. */
  faults?: readonly TwinFault[];
  /** Told of each request as it is sent, of its first token (TTFT, simulated ms) and of its record when it ends. */
  observer?: TwinLoadObserver;
  /** After the last request ended, the run goes on while this returns true (a fleet still settling). */
  keepRunning?: () => boolean;
}

interface TwinLoadObserver {
  /** `promptTokens`: the request's prompt length as scheduled (the sum of its segments). */
  sent(promptTokens: number): void;
  firstToken(ttftMs: number): void;
  ended(r: RequestRecord): void;
}

/** An open-loop run in the twin: the records, and what the gateway did about failures. */
export interface TwinOpenLoopResult extends OpenLoopResult {
  /** Failed attempts before a first token that were tried again. */
  retries: number;
  /** Broken streams a continuation mended. */
  recoveries: number;
  faults: FaultOutcome[];
}

export async function runTwinOpenLoop(fleet: TwinFleet, o: TwinOpenLoopOptions): Promise<TwinOpenLoopResult> {
  const { clock, gateway, engines } = fleet;
  const cpu0 = process.cpuUsage();
  const texts = new PromptTextCache();
  const gaps = new LogHistogram();
  const records: RequestRecord[] = [];
  const p: OpenLoopProgress = { elapsedMs: 0, sent: 0, done: 0, inFlight: 0, errors: 0 };
  const open = new Map<number, () => void>();
  let lastEnd = 0;
  let stopping = false;
  let retries = 0;
  let recoveries = 0;

  const record = (r: RequestRecord) => {
    records.push(r);
    o.observer?.ended(r);
    p.done++;
    if (r.error !== undefined) p.errors++;
    lastEnd = Math.max(lastEnd, r.atMs + r.durationMs);
  };

  const requests = new TwinRequests(gateway, engines, clock, seededUnit(fleet.seed ^ 0x2545f491));
  const send = (i: number) => {
    const r = o.requests[i]!;
    const sentAt = clock.now;
    p.sent++;
    o.observer?.sent(r.segments.reduce((a, s) => a + s.tokens, 0));
    const prompt = texts.prompt(r.segments);
    let last = NaN;
    let ended = false;
    const cancel = requests.send({
      keys: gateway.keysOf(prompt, r.maxTokens),
      prompt,
      maxTokens: r.maxTokens,
      onToken: (at) => {
        if (!Number.isNaN(last)) gaps.add(at - last);
        else o.observer?.firstToken(at - sentAt);
        last = at;
      },
      done: (a) => {
        ended = true;
        open.delete(i);
        retries += a.retries;
        recoveries += a.recoveries;
        const n = a.tokens;
        record({
          id: i,
          atMs: r.atMs,
          lateMs: 0,
          status: a.status,
          ...(a.endpoint !== undefined && a.status === 200 ? { endpoint: a.endpoint } : {}),
          durationMs: clock.now - sentAt,
          outputTokens: n,
          ...(a.status === 200 ? { promptTokens: a.promptTokens } : {}),
          ...(n > 0 ? { ttftMs: a.firstAt - sentAt, e2elMs: a.lastAt - sentAt } : {}),
          ...(n > 1 ? { tpotMs: (a.lastAt - a.firstAt) / (n - 1) } : {}),
          ...(a.error !== undefined ? { error: a.error } : {}),
        });
      },
    });
    if (!ended) open.set(i, cancel);
  };

  // The fleet's first replicas are up before the gateway's first poll.
  fleet.manager?.start();
  gateway.start();
  const faults = scheduleFaults(fleet, o.faults ?? [], () => !stopping);
  let next = 0;
  const sendDue = () => {
    while (next < o.requests.length && o.requests[next]!.atMs <= clock.now) send(next++);
    if (next < o.requests.length) clock.at(o.requests[next]!.atMs, sendDue);
  };
  if (o.requests.length > 0) clock.at(o.requests[0]!.atMs, sendDue);
  const lastSendAt = o.requests.at(-1)?.atMs ?? 0;
  const drain = () => {
    stopping = true;
    for (const abort of [...open.values()]) abort();
    open.clear();
  };
  clock.at(lastSendAt + o.drainMs, drain);
  const progress = () => {
    o.onProgress?.({ ...p, elapsedMs: clock.now, inFlight: open.size });
    if (!stopping) clock.after(PROGRESS_EVERY_SIM_MS, progress);
  };
  clock.after(PROGRESS_EVERY_SIM_MS, progress);

  const interrupted = () => o.stopped?.() === true;
  // Until every request sent has ended; the engines' and the gateway's periodic work would otherwise run forever.
  const over = () => next >= o.requests.length && open.size === 0 && p.done === p.sent && o.keepRunning?.() !== true;
  // In slices, giving the event loop a turn between them: Ctrl-C (a signal handler) and the progress line run there.
  while (!interrupted() && !over() && clock.size > 0) {
    let events = 0;
    clock.run(Infinity, () => interrupted() || over() || ++events > EVENTS_PER_SLICE);
    await new Promise<void>((r) => setImmediate(r));
  }
  if (interrupted()) {
    stopping = true;
    drain();
  }
  gateway.stop();
  fleet.manager?.stop();
  for (let i = next; i < o.requests.length; i++)
    record({ id: i, atMs: o.requests[i]!.atMs, lateMs: 0, status: 0, durationMs: 0, outputTokens: 0, error: "unsent: the run was stopped first" });
  const cpu = process.cpuUsage(cpu0);
  return { records, itl: gaps.toJSON(), wallMs: lastEnd, cpuS: (cpu.user + cpu.system) / 1e6, retries, recoveries, faults };
}
