/**
 * A closed-loop conversation load on a fleet twin: every conversation starts
 * at once, and each sends its next turn the moment the previous answer ends
 * (as inference-perf's conversation replay at a fixed concurrency). Each
 * request is admitted and routed by the gateway's own modules and answered
 * by the sim-engine's core, on the virtual clock.
 */
import type { TwinFleet } from "../../twin/twin-fleet.ts";
import { PromptTextCache } from "../replay/prompt-text.ts";
import { type Conversation, turnSegments } from "./codegen-workload.ts";

/** Events run between two turns of the event loop. */
const EVENTS_PER_SLICE = 20_000;

export interface TurnRecord {
  conversation: number;
  turn: number;
  sentAtMs: number;
  endAtMs: number;
  promptTokens: number;
  outputTokens: number;
  /** Absent when no token came. */
  ttftMs?: number;
  error?: string;
}

interface ConversationLoadOptions {
  conversations: readonly Conversation[];
  /** Checked between events: true stops the run (open turns are recorded as unfinished). */
  stopped?: () => boolean;
  /** Simulated time after which open turns are aborted: a bound on a run that cannot finish. */
  limitMs: number;
}

export async function runTwinConversations(fleet: TwinFleet, o: ConversationLoadOptions): Promise<TurnRecord[]> {
  const { clock, gateway, engines } = fleet;
  const texts = new PromptTextCache();
  const records: TurnRecord[] = [];
  const open = new Map<number, () => void>();
  let live = 0;

  const send = (ci: number, t: number) => {
    const c = o.conversations[ci]!;
    if (t >= c.turns.length) return;
    live++;
    const sentAtMs = clock.now;
    const prompt = texts.prompt(turnSegments(ci, c, t));
    const maxTokens = c.turns[t]!.outputTokens;
    const end = (r: Omit<TurnRecord, "conversation" | "turn" | "sentAtMs" | "endAtMs">, next: boolean) => {
      open.delete(ci);
      live--;
      records.push({ conversation: ci, turn: t, sentAtMs, endAtMs: clock.now, ...r });
      if (next) send(ci, t + 1);
    };
    let admitted = false;
    const cancel = gateway.admit(gateway.keysOf(prompt, maxTokens), (a) => {
      admitted = true;
      if (!a.ok) return end({ promptTokens: 0, outputTokens: 0, error: a.code }, false);
      const engine = engines[a.index]!;
      const tokens = engine.prompt(prompt);
      let first = NaN;
      let n = 0;
      let ended = false;
      const finish = (error?: string) => {
        if (ended) return;
        ended = true;
        // As its own event: the engine is still inside its step, and what the release lets flow may go to it.
        clock.at(clock.now, () => gateway.release(a));
        end(
          {
            promptTokens: tokens.count,
            outputTokens: n,
            ...(n > 0 ? { ttftMs: first - sentAtMs } : {}),
            ...(error !== undefined ? { error } : n === 0 ? { error: "no token in the answer" } : {}),
          },
          error === undefined && n > 0,
        );
      };
      const seq = engine.submit(tokens, maxTokens, {
        token: (_index, at) => {
          if (n === 0) {
            first = at;
            gateway.prefillDone(a);
          }
          n++;
        },
        finish: () => finish(),
      });
      open.set(ci, () => {
        engine.abort(seq);
        finish("unfinished: aborted at the end of the run");
      });
    });
    if (!admitted)
      open.set(ci, () => {
        if (cancel()) end({ promptTokens: 0, outputTokens: 0, error: "unfinished: aborted at the end of the run" }, false);
      });
  };

  gateway.start();
  let begun = false;
  clock.at(0, () => {
    begun = true;
    for (let ci = 0; ci < o.conversations.length; ci++) send(ci, 0);
  });
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const abort of [...open.values()]) abort();
  };
  clock.at(o.limitMs, stop);
  const interrupted = () => o.stopped?.() === true;
  const over = () => begun && live === 0;
  while (!interrupted() && !over() && clock.size > 0) {
    let events = 0;
    clock.run(Infinity, () => interrupted() || over() || ++events > EVENTS_PER_SLICE);
    await new Promise<void>((r) => setImmediate(r));
  }
  if (interrupted() && !stopping) stop();
  gateway.stop();
  return records;
}
