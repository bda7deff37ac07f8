/**
 * The open-loop load of the real-time benches (open-loop-driver.ts), sent
 * to a fleet twin (src/twin/) instead of a gateway: each request at its
 * scheduled time on the virtual clock, its prompt built from the same
 * segments, admitted and routed by the gateway's own modules, answered by
 * the sim-engine's core. The records have the real driver's shape, in
 * simulated milliseconds, so the same summaries read them.
 */
import type { TwinFleet } from "../../twin/twin-fleet.ts";
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
}

export async function runTwinOpenLoop(fleet: TwinFleet, o: TwinOpenLoopOptions): Promise<OpenLoopResult> {
  const { clock, gateway, engines } = fleet;
  const cpu0 = process.cpuUsage();
  const texts = new PromptTextCache();
  const gaps = new LogHistogram();
  const records: RequestRecord[] = [];
  const p: OpenLoopProgress = { elapsedMs: 0, sent: 0, done: 0, inFlight: 0, errors: 0 };
  const open = new Map<number, () => void>();
  let lastEnd = 0;
  let stopping = false;

  const record = (r: RequestRecord) => {
    records.push(r);
    p.done++;
    if (r.error !== undefined) p.errors++;
    lastEnd = Math.max(lastEnd, r.atMs + r.durationMs);
  };

  const send = (i: number) => {
    const r = o.requests[i]!;
    const sentAt = clock.now;
    p.sent++;
    const prompt = texts.prompt(r.segments);
    let admitted = false;
    const cancel = gateway.admit(gateway.keysOf(prompt, r.maxTokens), (a) => {
      admitted = true;
      open.delete(i);
      if (!a.ok) {
        record({
          id: i,
          atMs: r.atMs,
          lateMs: 0,
          status: a.code === "NO_READY_ENDPOINT" ? 503 : 429,
          durationMs: clock.now - sentAt,
          outputTokens: 0,
          error: `HTTP ${a.code === "NO_READY_ENDPOINT" ? 503 : 429} ${a.code}`,
        });
        return;
      }
      const engine = engines[a.index]!;
      const tokens = engine.prompt(prompt);
      let first = NaN;
      let last = NaN;
      let n = 0;
      let ended = false;
      const finish = (error?: string) => {
        if (ended) return;
        ended = true;
        open.delete(i);
        // As its own event: the engine is still inside its step, and what the release lets flow may go to it.
        clock.at(clock.now, () => gateway.release(a));
        record({
          id: i,
          atMs: r.atMs,
          lateMs: 0,
          status: 200,
          endpoint: engine.id,
          durationMs: clock.now - sentAt,
          outputTokens: n,
          promptTokens: tokens.count,
          ...(n > 0 ? { ttftMs: first - sentAt, e2elMs: last - sentAt } : {}),
          ...(n > 1 ? { tpotMs: (last - first) / (n - 1) } : {}),
          ...(error !== undefined ? { error } : n === 0 ? { error: "no token in the answer" } : {}),
        });
      };
      const seq = engine.submit(tokens, r.maxTokens, {
        token: (_index, at) => {
          if (n === 0) {
            first = at;
            gateway.prefillDone(a);
          } else gaps.add(at - last);
          last = at;
          n++;
        },
        finish: () => finish(),
      });
      open.set(i, () => {
        engine.abort(seq);
        finish("unfinished: aborted at the end of the run");
      });
    });
    // Still in the admission queue: the drain takes it out as the real client's abort would.
    if (!admitted)
      open.set(i, () => {
        if (!cancel()) return;
        open.delete(i);
        record({
          id: i,
          atMs: r.atMs,
          lateMs: 0,
          status: 0,
          durationMs: clock.now - sentAt,
          outputTokens: 0,
          error: "unfinished: aborted at the end of the run",
        });
      });
  };

  gateway.start();
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
  };
  clock.at(lastSendAt + o.drainMs, drain);
  const progress = () => {
    o.onProgress?.({ ...p, elapsedMs: clock.now, inFlight: open.size });
    if (!stopping) clock.after(PROGRESS_EVERY_SIM_MS, progress);
  };
  clock.after(PROGRESS_EVERY_SIM_MS, progress);

  const interrupted = () => o.stopped?.() === true;
  // Until every request sent has ended; the engines' and the gateway's periodic work would otherwise run forever.
  const over = () => next >= o.requests.length && open.size === 0 && p.done === p.sent;
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
  for (let i = next; i < o.requests.length; i++)
    record({ id: i, atMs: o.requests[i]!.atMs, lateMs: 0, status: 0, durationMs: 0, outputTokens: 0, error: "unsent: the run was stopped first" });
  const cpu = process.cpuUsage(cpu0);
  return { records, itl: gaps.toJSON(), wallMs: lastEnd, cpuS: (cpu.user + cpu.system) / 1e6 };
}
