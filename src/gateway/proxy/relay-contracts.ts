/**
 * What the SSE relay (relay.ts) talks to — the request's Exchange as a
 * RelayOwner, a stream's recovery as a RelayRecovery: small
 * interfaces, so the relay is tested alone — the few event reads and writes
 * it shares, and how a recovery opens a continuation (OpenContinuation,
 * given to it by the attempt loop: continuation/ never opens an upstream
 * itself).
 */
import type { AttemptFailure, BreakCause, Outcome, Route } from "../../metrics/names.ts";
import { type ErrorCode, errorBody } from "../../shared/errors.ts";
import type { RequestTrace } from "../../tracing/tracer-contract.ts";
import type { Grant } from "../admission-client.ts";
import type { AttemptVerdict, Usage } from "../request/exchange.ts";
import type { Evictable } from "../stream-evictions.ts";
import { eventJson } from "./sse-scanner.ts";
import type { OpenStream } from "./upstream.ts";

export type { OpenStream };

const enc = new TextEncoder();
export const DONE_EVENT = enc.encode("data: [DONE]\n\n");

export function sseErrorEvent(code: ErrorCode, message: string): Uint8Array {
  return enc.encode(`data: ${JSON.stringify(errorBody(code, message))}\n\n`);
}

const usageDecoder = new TextDecoder();

/**
 * The usage of a usage event (one the scanner classified "usage": `data:`,
 * then one JSON object). Decoded with one shared decoder and parsed straight
 * from the `{`: a decoder constructed, the text trimmed and sliced per event
 * cost as much as the parse.
 */
export function readUsage(bytes: Uint8Array): Usage | undefined {
  const open = bytes.indexOf(123 /* { */);
  let json: unknown;
  try {
    json = open < 0 ? undefined : JSON.parse(usageDecoder.decode(bytes.subarray(open)));
  } catch {
    return undefined;
  }
  const usage = typeof json === "object" && json !== null ? (json as { usage?: unknown }).usage : undefined;
  if (typeof usage !== "object" || usage === null) return undefined;
  const u = usage as Record<string, unknown>;
  return {
    prompt_tokens: typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0,
    completion_tokens: typeof u.completion_tokens === "number" ? u.completion_tokens : 0,
  };
}

export function engineErrorMessage(bytes: Uint8Array): string {
  const msg = (eventJson(bytes) as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof msg === "string" ? msg : "engine reported an error mid-stream";
}

/** What the relay reports to: the request's Exchange (a small interface, so the relay is tested alone). */
export interface RelayOwner {
  /** The API whose stream this is (its dialect: stream-dialect.ts); chat's when absent. */
  readonly route?: Route;
  /** The request offered tools: tool calls in the stream are counted into `toolCalls`. */
  readonly offersTools?: boolean;
  /** Tool calls the answer started. */
  toolCalls?: number;
  /** The client asked for stream_options.include_usage. */
  readonly includeUsage: boolean;
  /** Data events relayed so far (the relay counts them). */
  delivered: number;
  /** Choices the answer has (the request's n): a stream is complete once each has a finish_reason. */
  readonly choices: number;
  usage: Usage | undefined;
  /** The request's spans (tracing on): told each choice's finish_reason. */
  readonly trace?: RequestTrace | undefined;
  firstToken(now: number): void;
  tokens(now: number): void;
  /** An invalid event was dropped. */
  malformed(): void;
  endAttempt(verdict: AttemptVerdict): void;
  finish(outcome: Outcome, status: number, error?: string, errorCode?: ErrorCode): void;
}

/** A stream's continuation on another replica (continuation/stream-recovery.ts), as the relay sees it. */
export interface RelayRecovery {
  /** Whether the events going to the client are tracked (false: the request cannot be continued; breaks are only counted). */
  readonly tracking: boolean;
  /** A continuation is being relayed: its data and usage events go through rewrite(). */
  readonly rewriting: boolean;
  /** The honest usage of the whole answer, once a continuation's usage chunk went through rewrite(). */
  readonly usage: Usage | undefined;
  /** The relay that evict() reaches while its stream is open. */
  bind(stream: Evictable): void;
  /** A data event (a Responses API's meta event too) of the original stream went to the client (the hot path: bytes only). */
  observe(event: Uint8Array): void;
  /** A data or usage event of a continuation (a Responses API's meta and final events too): the bytes the client gets instead, or undefined to drop it. */
  rewrite(kind: "data" | "usage" | "meta" | "final", event: Uint8Array): Uint8Array | undefined;
  /** The stream broke (its attempt already ended): a continuation to go on with, or undefined. */
  resume(cause: BreakCause): Promise<OpenStream | undefined>;
  /** The relay is over. */
  close(): void;
}

/** One continuation attempt: the granted endpoint, the model, the body to send, and the request's time left. */
interface ContinuationAttempt {
  grant: Grant;
  model: string;
  body: string;
  leftMs: number;
}

/** A continuation attempt that failed; its verdict already went to the request's Exchange. */
export interface ContinuationFailed {
  ok: false;
  failure: AttemptFailure | "cancelled";
  /** The engine rejected the prefill itself (a chat continuation it cannot take; not a length error): why, in its words. */
  refusedPrefill?: { status: number; message: string };
}

/**
 * Sends a continuation through the request's Exchange (hold, sending) and
 * judges a failure; an open stream comes back unjudged and not yet
 * answered(): the recovery decides whether it is still wanted.
 */
export type OpenContinuation = (attempt: ContinuationAttempt) => Promise<OpenStream | ContinuationFailed>;

/** The event buf[start, end) as one array (the chunk itself when it is the whole event, the usual case). */
export function view(buf: Uint8Array, start: number, end: number): Uint8Array {
  return start === 0 && end === buf.length ? buf : buf.subarray(start, end);
}

/** Stop an upstream stream the relay will not read again (the engine stops generating). */
export function abandon(open: OpenStream): void {
  open.deadlines.abort("stream abandoned");
  open.deadlines.dispose();
  void open.reader.cancel().catch(() => {});
}
