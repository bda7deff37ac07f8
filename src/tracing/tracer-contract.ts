/** What the request path sees of tracing: a tracer that starts one trace per request, and that trace's few hooks (absent when tracing is off). */
import type { BreakCause, Outcome, RecoveryResult, Route } from "../metrics/names.ts";
import type { GrantDetail } from "../protocol/scheduler-messages.ts";
import type { ErrorCode } from "../shared/errors.ts";

/** An attempt's verdict as a trace records it (the Exchange's AttemptVerdict, structurally). */
interface TracedVerdict {
  kind: "healthy" | "fault" | "cool_down" | "neutral";
  failure?: string;
}

/**
 * One request's spans: the request's own (GenAI semantic conventions) and
 * its children — admission, each scheduling decision, each upstream attempt,
 * each continuation. Every hook is cheap and never throws.
 */
export interface RequestTrace {
  /** The body was parsed: the model asked for, whether it streams. */
  parsed(model: string, stream: boolean): void;
  /** The first scheduling decision waits in admission from now. */
  admitting(band: string): void;
  /** An endpoint was chosen (admission's first grant or a rescheduling): how many were ranked, its scores, the filters' drops. */
  scheduled(grant: Pick<GrantDetail, "scores" | "drops" | "candidates" | "waitedMs"> & { path?: string }, endpointId: string | undefined, model: string): void;
  /** Admission or scheduling found nothing, or refused. */
  unscheduled(code: string): void;
  /** An upstream attempt starts: its span opens and `headers` get its traceparent (and the client's tracestate). */
  attempt(headers: Record<string, string>, url: string, endpointId: string | undefined, model: string): void;
  attemptEnded(verdict: TracedVerdict): void;
  /** The engine answered the attempt for `model`. */
  answered(model: string): void;
  /** A complete JSON answer: its id, model and finish reasons. */
  answerBody(body: Uint8Array): void;
  /** A stream's first event: its id and model. */
  firstEvent(event: Uint8Array): void;
  /** A stream event in which a choice finished: its finish_reason. */
  finishEvent(event: Uint8Array): void;
  firstToken(ttftMs: number): void;
  /** A stream broke after its first byte: a continuation is being looked for. */
  continuing(cause: BreakCause): void;
  continued(result: RecoveryResult, reason?: string): void;
  /** The request is over: every open span ends. */
  finish(outcome: Outcome, status: number, usage: { prompt_tokens: number; completion_tokens: number } | undefined, errorCode?: ErrorCode): void;
}

export interface RequestTracer {
  /** A trace for a request that just arrived, continuing the client's `traceparent` when it sent one. */
  start(headers: Headers, route: Route, path: string, requestId: string): RequestTrace;
  /** Export what is queued and stop (on gateway stop). */
  shutdown(): Promise<void>;
}
