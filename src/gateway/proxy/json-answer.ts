/**
 * Non-streaming answers, as bytes. An answer is buffered while it is small
 * (up to BUFFER_LIMIT_BYTES, within one gateway-wide budget of bytes held
 * for all requests): until it is complete nothing has reached the client, so
 * a failure can still be retried elsewhere. A larger answer — or any answer
 * once the budget is spent — is committed: its headers and what was read go
 * out, and the rest streams through with backpressure, counted against
 * max_response_bytes, never held whole. Neither kind is parsed whole: the
 * usage object is read from the answer's tail, where OpenAI-shaped answers
 * put it (absent when it is not there).
 */
import type { AttemptFailure, Outcome } from "../../metrics/names.ts";
import type { ErrorCode } from "../../shared/errors.ts";
import type { AttemptVerdict, Usage } from "../request/exchange.ts";
import type { BodyReader } from "./body-reader.ts";
import type { AttemptDeadlines } from "./deadlines.ts";
import { FAILURE_CODE } from "./failures.ts";

/** Answers up to this size are held until complete (retriable); larger ones stream through. */
const BUFFER_LIMIT_BYTES = 1024 * 1024;
/** Bytes every request's buffered answers may hold together. */
const BUFFER_BUDGET_BYTES = 256 * 1024 * 1024;
/** A committed answer gives the event loop a turn after this many bytes. */
const YIELD_EVERY_BYTES = 256 * 1024;
/** The usage object sits within this many bytes of an answer's end. */
const TAIL_BYTES = 16 * 1024;

let heldBytes = 0;

interface CompleteAnswer {
  kind: "complete";
  body: Uint8Array;
}

export interface CommittedAnswer {
  kind: "committed";
  /** What was read before committing, then the reader for the rest. */
  head: Uint8Array[];
  headBytes: number;
  reader: BodyReader;
  deadlines: AttemptDeadlines;
}

/**
 * Read an answer until it is complete or too big to hold. Throws what the
 * reader throws (the caller classifies it); returns "too_large" past `max`.
 */
export async function readAnswer(reader: BodyReader, deadlines: AttemptDeadlines, max: number): Promise<CompleteAnswer | CommittedAnswer | "too_large"> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for (;;) {
      const got = reader.readMany();
      const r = got instanceof Promise ? await got : got;
      for (const c of r.value) {
        chunks.push(c);
        total += c.byteLength;
        heldBytes += c.byteLength;
      }
      if (total > max) {
        void reader.cancel().catch(() => {});
        return "too_large";
      }
      if (r.done) return { kind: "complete", body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total) };
      if (total > BUFFER_LIMIT_BYTES || heldBytes > BUFFER_BUDGET_BYTES) return { kind: "committed", head: chunks, headBytes: total, reader, deadlines };
    }
  } finally {
    heldBytes -= total;
  }
}

/** What the relay of a committed answer reports to (the request's Exchange). */
interface AnswerOwner {
  usage: Usage | undefined;
  endAttempt(verdict: AttemptVerdict): void;
  finish(outcome: Outcome, status: number, error?: string, errorCode?: ErrorCode): void;
}

/**
 * Stream the rest of a committed answer to the client (Bun's direct stream:
 * write, flush, await the socket's push back). A cut connection or an answer
 * that grows past `max` aborts the response: a client must see a broken
 * answer as broken, not as a short JSON document.
 */
export function relayAnswer(x: AnswerOwner, a: CommittedAnswer, max: number): ReadableStream<Uint8Array> {
  let tail: Uint8Array = new Uint8Array(0);
  const keepTail = (c: Uint8Array) => {
    tail = c.byteLength >= TAIL_BYTES ? c.subarray(c.byteLength - TAIL_BYTES) : (Buffer.concat([tail, c]).subarray(-TAIL_BYTES) as Uint8Array);
  };
  let total = a.headBytes;
  let over = false;
  const end = (failure: AttemptFailure | undefined, message?: string) => {
    if (over) return;
    over = true;
    a.deadlines.dispose();
    if (failure === undefined) {
      x.usage = usageFromTail(tail);
      x.endAttempt({ kind: "neutral" });
      x.finish("ok", 200);
    } else {
      void a.reader.cancel().catch(() => {});
      x.endAttempt(failure === "too_large" ? { kind: "neutral", failure } : { kind: "fault", failure });
      x.finish("stream_error", 200, message, FAILURE_CODE[failure]);
    }
  };
  return new ReadableStream<Uint8Array>({
    type: "direct",
    async pull(controller) {
      try {
        for (const c of a.head) {
          keepTail(c);
          controller.write(c);
        }
        controller.flush();
        let sinceYield = 0;
        for (;;) {
          const got = a.reader.readMany();
          const r = got instanceof Promise ? await got : got;
          for (const c of r.value) {
            total += c.byteLength;
            if (total > max) throw new AnswerTooLarge();
            keepTail(c);
            const w = controller.write(c);
            if (w instanceof Promise) await w;
            sinceYield += c.byteLength;
            // A fast engine and a fast client never push back: without a turn
            // given up now and then, a 240 MB answer would hold the event loop
            // (health checks, other streams) for as long as it takes to copy.
            // Checked per chunk: a reader that fell behind (a starved CPU)
            // hands back many megabytes in one batch.
            if (sinceYield >= YIELD_EVERY_BYTES) {
              sinceYield = 0;
              controller.flush();
              await new Promise<void>((resolve) => setImmediate(resolve));
            }
          }
          controller.flush();
          if (r.done) break;
        }
        end(undefined);
        controller.close();
      } catch (err) {
        if (over) return; // the client left first
        if (err instanceof AnswerTooLarge) end("too_large", `engine answer exceeds max_response_bytes (${max} bytes)`);
        else end(a.deadlines.fired === "total_timeout" ? "total_timeout" : "truncated", "the engine connection broke during the answer");
        controller.close(new Error("upstream answer broken"));
      }
    },
    cancel() {
      if (over) return;
      over = true;
      a.deadlines.abort("client went away");
      void a.reader.cancel().catch(() => {});
      x.endAttempt({ kind: "neutral" });
      x.finish("cancelled", 200);
    },
  });
}

class AnswerTooLarge extends Error {}

const USAGE_KEY = new TextEncoder().encode('"usage"');

/**
 * The usage object of an OpenAI-shaped answer from its last bytes: the last
 * "usage" key, then the balanced {…} after it (strings skipped), parsed alone.
 * undefined when it is not there or does not parse.
 */
export function usageFromTail(tail: Uint8Array): Usage | undefined {
  const at = Buffer.from(tail.buffer, tail.byteOffset, tail.byteLength).lastIndexOf(USAGE_KEY);
  if (at < 0) return undefined;
  let i = at + USAGE_KEY.length;
  while (i < tail.length && tail[i] !== 123 /* { */) {
    if (tail[i] !== 32 && tail[i] !== 58 /* : */ && tail[i] !== 9 && tail[i] !== 10 && tail[i] !== 13) return undefined;
    i++;
  }
  const start = i;
  let depth = 0;
  let inString = false;
  for (; i < tail.length; i++) {
    const b = tail[i]!;
    if (inString) {
      if (b === 92 /* \ */) i++;
      else if (b === 34) inString = false;
      continue;
    }
    if (b === 34) inString = true;
    else if (b === 123) depth++;
    else if (b === 125 && --depth === 0) break;
  }
  if (depth !== 0) return undefined;
  try {
    return usageOf(JSON.parse(new TextDecoder().decode(tail.subarray(start, i + 1))) as Record<string, unknown>);
  } catch {
    return undefined;
  }
}

/**
 * Tokens from a usage object in any of the engines' shapes: chat's and the
 * pooling routes' (prompt_tokens, completion_tokens), the Responses API's
 * (input_tokens, output_tokens), rerank's (total_tokens alone: all prompt).
 * A transcription's `{"type":"duration","seconds"}` counts no tokens.
 */
function usageOf(u: Record<string, unknown>): Usage | undefined {
  const n = (v: unknown): number => (typeof v === "number" ? v : 0);
  if (typeof u.prompt_tokens === "number") return { prompt_tokens: u.prompt_tokens, completion_tokens: n(u.completion_tokens) };
  if (typeof u.input_tokens === "number") return { prompt_tokens: u.input_tokens, completion_tokens: n(u.output_tokens) };
  if (typeof u.total_tokens === "number") return { prompt_tokens: u.total_tokens, completion_tokens: 0 };
  return undefined;
}
