/**
 * A closed-loop conversation load on a fleet twin: every conversation starts
 * at once, and each sends its next turn the moment the previous answer ends
 * (as inference-perf's conversation replay at a fixed concurrency). Each
 * request goes through the twin's gateway (twin-request.ts: admission,
 * routing, the attempt loop's rules) and is answered by the sim-engine's
 * core, on the virtual clock.
 */

import { seededUnit } from "../../shared/seeded.ts";
import { type FaultOutcome, scheduleFaults } from "../../twin/fault-schedule.ts";
import type { TwinFault } from "../../twin/faults.ts";
import type { TwinFleet } from "../../twin/twin-fleet.ts";
import { TwinRequests } from "../../twin/twin-request.ts";
import { PromptTextCache } from "../replay/prompt-text.ts";
import { type Conversation, turnSegments } from "./codegen-workload.ts";

/** Events run between two turns of the event loop. */
const EVENTS_PER_SLICE = 20_000;

export interface TurnRecord {
  conversation: number;
  turn: number;
  sentAtMs: number;
  endAtMs: number;
  /** 200 once a stream opened, the gateway's error status for a refusal, 0 for a turn still queued when the run ended. */
  status: number;
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
  /** Faults applied to the engines and the gateway at their times. */
  faults?: readonly TwinFault[];
}

/** A conversation run's turns, and what the gateway did about failures. */
interface ConversationRun {
  records: TurnRecord[];
  /** Failed attempts before a first token that were tried again, and broken streams a continuation mended. */
  retries: number;
  recoveries: number;
  faults: FaultOutcome[];
}

export async function runTwinConversations(fleet: TwinFleet, o: ConversationLoadOptions): Promise<ConversationRun> {
  const { clock, gateway, engines } = fleet;
  const requests = new TwinRequests(gateway, engines, clock, seededUnit(fleet.seed ^ 0x2545f491));
  const texts = new PromptTextCache();
  const records: TurnRecord[] = [];
  const open = new Map<number, () => void>();
  let live = 0;
  let retries = 0;
  let recoveries = 0;

  const send = (ci: number, t: number) => {
    const c = o.conversations[ci]!;
    if (t >= c.turns.length) return;
    live++;
    const sentAtMs = clock.now;
    const prompt = texts.prompt(turnSegments(ci, c, t));
    const maxTokens = c.turns[t]!.outputTokens;
    const end = (r: Omit<TurnRecord, "conversation" | "turn" | "sentAtMs" | "endAtMs" | "status">, status: number, next: boolean) => {
      open.delete(ci);
      live--;
      records.push({ conversation: ci, turn: t, sentAtMs, endAtMs: clock.now, status, ...r });
      if (next) send(ci, t + 1);
    };
    let ended = false;
    const cancel = requests.send({
      keys: gateway.keysOf(prompt, maxTokens),
      prompt,
      maxTokens,
      onToken: () => {},
      done: (a) => {
        ended = true;
        retries += a.retries;
        recoveries += a.recoveries;
        if (a.status !== 200 && a.status !== 0) return end({ promptTokens: 0, outputTokens: 0, error: a.error ?? `HTTP ${a.status}` }, a.status, false);
        const error = a.error ?? (a.tokens === 0 ? "no token in the answer" : undefined);
        end(
          {
            promptTokens: a.promptTokens,
            outputTokens: a.tokens,
            ...(a.tokens > 0 ? { ttftMs: a.firstAt - sentAtMs } : {}),
            ...(error !== undefined ? { error } : {}),
          },
          a.status,
          error === undefined,
        );
      },
    });
    if (!ended) open.set(ci, cancel);
  };

  gateway.start();
  let stopping = false;
  const faults = scheduleFaults(fleet, o.faults ?? [], () => !stopping);
  let begun = false;
  clock.at(0, () => {
    begun = true;
    for (let ci = 0; ci < o.conversations.length; ci++) send(ci, 0);
  });
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
  return { records, retries, recoveries, faults };
}
