/**
 * Opens one upstream attempt: dial check, POST to the engine under the
 * attempt's deadlines, and — for streams — read up to the first complete SSE
 * event, so that every failure before the first byte reaches the client can
 * still be retried elsewhere. Returns an open stream (whose reader the relay
 * then owns), a complete JSON answer, or a classified failure; never throws
 * for upstream trouble.
 */
import type { Deadlines } from "../../config/types.ts";
import type { AttemptFailure, Route } from "../../metrics/names.ts";
import type { UpstreamDial, UpstreamFetch } from "../upstream-reach.ts";
import { type BodyReader, defaultReader } from "./body-reader.ts";
import { AttemptDeadlines } from "./deadlines.ts";
import { http1, type UpstreamAnswer, type UpstreamPost } from "./http1-client.ts";
import { type CommittedAnswer, readAnswer } from "./json-answer.ts";
import { classifierFor } from "./responses-events.ts";
import { MAX_EVENT_BYTES, type ScannedEvent, SseScanner } from "./sse-scanner.ts";

interface AttemptInput {
  index: number;
  url: string;
  body: Uint8Array | string;
  headers: Record<string, string>;
  stream: boolean;
  deadlines: Deadlines;
  /** Milliseconds left of the request's total deadline. */
  totalLeftMs: number;
  clientSignal: AbortSignal;
  dial: UpstreamDial;
  /** When absent: the HTTP/1.1 client for streams from http: engines (http1-client.ts), global fetch otherwise. */
  fetch?: UpstreamFetch;
  /** A non-streaming answer larger than this is refused (failure "too_large"). */
  maxResponseBytes: number;
  /** The API, for how its stream's events are read (chat's when absent). */
  route?: Route;
}

export interface OpenStream {
  ok: true;
  kind: "stream";
  reader: BodyReader;
  scanner: SseScanner;
  deadlines: AttemptDeadlines;
  /** The complete events read so far (at least one). */
  firstEvents: ScannedEvent[];
  /** Malformed events dropped while waiting for the first one. */
  malformedDropped: number;
}

interface CompleteJson {
  ok: true;
  kind: "json";
  status: number;
  contentType: string;
  body: Uint8Array;
}

export interface AttemptFailed {
  ok: false;
  failure: AttemptFailure | "cancelled";
  message: string;
  /** Engine status when it answered with an error. */
  status?: number;
  /** The engine's error body (4xx passed through to the client). */
  body?: Uint8Array;
  /** The engine's Retry-After, ms. */
  retryAfterMs?: number;
  /** A silence deadline that fired while the gateway's own loop had stalled (not the engine's failure). */
  excused?: boolean;
}

/** A non-streaming answer too large to hold: it streams through once committed. */
interface JsonStream {
  ok: true;
  kind: "json-stream";
  contentType: string;
  answer: CommittedAnswer;
}

export type AttemptResult = OpenStream | CompleteJson | JsonStream | AttemptFailed;

/** Bodies of error answers are read only this far (an engine error page is not a payload). */
const MAX_ERROR_BODY_BYTES = 64 * 1024;

function parseRetryAfterMs(value: string | null): number | undefined {
  if (!value) return undefined;
  const s = Number(value);
  if (Number.isFinite(s)) return Math.max(0, s * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

async function readLimited(reader: BodyReader | null, limit: number): Promise<Uint8Array> {
  if (reader === null) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const got = reader.readMany();
    const { done, value } = got instanceof Promise ? await got : got;
    for (const chunk of value) {
      chunks.push(chunk);
      total += chunk.byteLength;
    }
    if (done) break;
    if (total >= limit) {
      await reader.cancel();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit);
}

/** POST through the injected fetch, or global fetch: its Response as an UpstreamAnswer. */
async function postViaFetch(f: UpstreamFetch, url: string, req: UpstreamPost): Promise<UpstreamAnswer> {
  const res = await f(url, { method: "POST", headers: req.headers, body: req.body, signal: req.signal });
  return { status: res.status, header: (name) => res.headers.get(name), body: res.body ? defaultReader(res.body) : null };
}

/**
 * The request to the engine. A stream from a plain-http engine goes through
 * the HTTP/1.1 client (http1-client.ts: less of the process's CPU per
 * streamed request than fetch, docs/benchmarks.md "The upstream client"); a
 * non-streaming answer through fetch, whose body buffers Bun recycles
 * natively: a 240 MB embeddings answer passed through the client's socket
 * allocates a fresh buffer per read, and four at once raised the gateway's
 * peak RSS by 218–264 MiB against fetch's 151–169. https engines, and an
 * injected fetch (the in-process tests, the twin), go through fetch.
 */
function post(input: AttemptInput, url: string, req: UpstreamPost): Promise<UpstreamAnswer> {
  if (input.fetch === undefined && input.stream && url.startsWith("http:")) return http1.post(url, req);
  return postViaFetch(input.fetch ?? fetch, url, req);
}

function failed(failure: AttemptFailed["failure"], message: string, extra: Partial<AttemptFailed> = {}): AttemptFailed {
  return { ok: false, failure, message, ...extra };
}

/** An error's message without the runtime's advice to its own developers (Bun's "pass `verbose: true` …"). */
function cleanMessage(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.replace(/\s*For more information, pass `verbose: true`[^.]*\.?/g, "").trim() || "connection failed";
}

/**
 * A non-streaming answer (status 200): refused when it is an event stream or
 * declares more than max_response_bytes, held when complete and small,
 * committed to stream through otherwise (json-answer.ts). A connection cut
 * while reading it is a truncated answer, retried elsewhere (nothing reached
 * the client yet).
 */
async function openAnswer(res: UpstreamAnswer, dl: AttemptDeadlines, max: number, reasonOf: (err: unknown) => AttemptFailed): Promise<AttemptResult> {
  const contentType = res.header("content-type") ?? "application/json";
  const declared = Number(res.header("content-length") ?? NaN);
  const refuse = (failure: AttemptFailure, message: string): AttemptFailed => {
    dl.dispose();
    void res.body?.cancel().catch(() => {});
    return failed(failure, message);
  };
  if (contentType.includes("text/event-stream")) return refuse("malformed", "engine answered a non-streaming request with an event stream");
  if (declared > max) return refuse("too_large", `engine answer exceeds max_response_bytes (${max} bytes)`);
  if (!res.body) {
    dl.dispose();
    return { ok: true, kind: "json", status: 200, contentType, body: new Uint8Array(0) };
  }
  try {
    const a = await readAnswer(res.body, dl, max);
    if (a === "too_large") return refuse("too_large", `engine answer exceeds max_response_bytes (${max} bytes)`);
    if (a.kind === "committed") return { ok: true, kind: "json-stream", contentType, answer: a };
    dl.dispose();
    return { ok: true, kind: "json", status: 200, contentType, body: a.body };
  } catch (err) {
    const f = reasonOf(err);
    return f.failure === "connect" ? failed("truncated", "the engine connection broke during the answer") : f;
  }
}

export async function openUpstream(input: AttemptInput, path: string): Promise<AttemptResult> {
  const { deadlines: d } = input;
  if (!input.dial.isRecent(input.index)) {
    try {
      await input.dial.check(input.index, d.dialMs);
    } catch (err) {
      return failed("connect", cleanMessage(err));
    }
  }
  if (input.clientSignal.aborted) return failed("cancelled", "client went away");

  const dl = new AttemptDeadlines(input.totalLeftMs, input.clientSignal);
  // Engines answer a non-streaming request only when generation is done, so
  // for those the total deadline alone bounds the wait for headers.
  if (input.stream) dl.armHeaders(d.headersMs);
  const signal = dl.signal;
  const reasonOf = (err: unknown): AttemptFailed => {
    dl.dispose();
    if (input.clientSignal.aborted) return failed("cancelled", "client went away");
    if (dl.fired)
      return failed(
        dl.fired,
        `upstream ${dl.fired.replace("_", " ")} after ${describeDeadline(dl.fired, d, input.totalLeftMs)} ms`,
        dl.excused ? { excused: true } : {},
      );
    return failed("connect", cleanMessage(err));
  };

  let res: UpstreamAnswer;
  try {
    res = await post(input, input.url + path, { headers: input.headers, body: input.body, signal });
  } catch (err) {
    return reasonOf(err);
  }
  input.dial.markOk(input.index);

  if (res.status !== 200) {
    let body: Uint8Array;
    try {
      body = await readLimited(res.body, MAX_ERROR_BODY_BYTES);
    } catch (err) {
      return reasonOf(err);
    }
    dl.dispose();
    const retryAfterMs = parseRetryAfterMs(res.header("retry-after"));
    const status = res.status;
    const failure: AttemptFailure = status === 429 ? "status_429" : status >= 500 || status === 408 ? "status_5xx" : "status_4xx";
    return failed(failure, `engine answered ${status}`, { status, body, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) });
  }

  if (!input.stream) return openAnswer(res, dl, input.maxResponseBytes, reasonOf);
  return openStream(res, dl, d, reasonOf, new SseScanner(classifierFor(input.route)));
}

/**
 * A stream (status 200): read up to its first complete event, so that every
 * failure before the first byte reaches the client can still be retried
 * elsewhere; from there the relay owns the reader.
 */
async function openStream(
  res: UpstreamAnswer,
  dl: AttemptDeadlines,
  d: Deadlines,
  reasonOf: (err: unknown) => AttemptFailed,
  scanner: SseScanner,
): Promise<AttemptResult> {
  if (!res.body) {
    dl.dispose();
    return failed("truncated", "engine sent a stream with no body");
  }
  dl.armFirstToken(d.firstTokenMs);
  const reader = res.body;
  let malformedDropped = 0;
  const giveUp = (failure: AttemptFailure, message: string): AttemptFailed => {
    dl.dispose();
    void reader.cancel().catch(() => {});
    return failed(failure, message);
  };
  try {
    for (;;) {
      const got = reader.readMany();
      const { done, value } = got instanceof Promise ? await got : got;
      const events: ScannedEvent[] = [];
      for (const chunk of value) {
        for (const e of scanner.push(chunk)) {
          if (e.kind === "malformed") malformedDropped++;
          else if (e.kind !== "comment") events.push(e);
        }
        if (scanner.overflowed) return giveUp("malformed", `engine sent an SSE event over ${MAX_EVENT_BYTES} bytes`);
      }
      if (events.length === 0) {
        if (done) return giveUp("truncated", "engine closed the stream before the first event");
        continue;
      }
      if (events[0]!.kind === "error")
        return giveUp("status_5xx", `engine sent an error event before the first token: ${new TextDecoder().decode(events[0]!.bytes).trim().slice(0, 300)}`);
      dl.armIdle(d.idleMs);
      return { ok: true, kind: "stream", reader, scanner, deadlines: dl, firstEvents: events, malformedDropped };
    }
  } catch (err) {
    void reader.cancel().catch(() => {});
    return reasonOf(err);
  }
}

function describeDeadline(name: string, d: Deadlines, totalLeftMs: number): number {
  switch (name) {
    case "headers_timeout":
      return d.headersMs;
    case "first_token_timeout":
      return d.firstTokenMs;
    case "idle_timeout":
      return d.idleMs;
    default:
      return Math.round(totalLeftMs);
  }
}
