/**
 * Scheduling decisions written down as they are made, one JSON line each:
 * the request as scoring saw it, every endpoint's view as read from the
 * shared tables, the random numbers the picker drew, and the endpoint it
 * chose. Enough to make the same decision again elsewhere (the fleet twin's
 * replay, src/twin/decision-replay.ts), in order: the prefix index a
 * decision reads is what the decisions before it recorded.
 *
 * Off unless LLMGW_RECORD_DECISIONS names a file. Each thread that decides
 * (the main thread's fast path, the scheduler worker's queue) appends its
 * own lines, each with one write; a debugging aid, not for production load.
 */
import { appendFileSync } from "node:fs";
import type { EndpointView, RequestView } from "../scheduling/types.ts";

/** The environment variable naming the file decisions are appended to. */
const RECORD_DECISIONS_ENV = "LLMGW_RECORD_DECISIONS";

export interface DecisionRecord {
  /** "main" (the fast path) or "scheduler" (a queued request). */
  thread: string;
  /** Date.now() of the decision. */
  at: number;
  /** The request's view; `exclude` as a list. */
  req: Omit<RequestView, "exclude"> & { exclude?: number[] };
  views: EndpointView[];
  /** What the picker drew from the random source, in order. */
  draws: number[];
  /** The chosen endpoint's index, or null when none was chosen. */
  pick: number | null;
}

export interface DecisionRecorder {
  record(r: DecisionRecord): void;
}

/** A recorder appending to the file LLMGW_RECORD_DECISIONS names, or undefined when it names none. */
export function decisionRecorderFromEnv(env: Record<string, string | undefined> = process.env): DecisionRecorder | undefined {
  const path = env[RECORD_DECISIONS_ENV];
  if (path === undefined || path === "") return undefined;
  return {
    record(r: DecisionRecord): void {
      appendFileSync(path, `${JSON.stringify(r)}\n`);
    },
  };
}
