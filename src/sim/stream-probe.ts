/**
 * A cheap client-side SSE observer for benchmarks: counts token events by
 * scanning bytes for `data: {` (a `data: [DONE]` is not a token) and records
 * the gap between reads that carried tokens, without decoding or parsing
 * JSON. A read with k token events records its gap and k-1 zero gaps (the
 * client saw a burst).
 */

const D = 100; // "d"
const PATTERN = [100, 97, 116, 97, 58, 32, 123]; // "data: {"

/** Number of `data: {` occurrences in `buf` (events never split across a match boundary here matter little: see carry). */
export function countTokenEvents(buf: Uint8Array, start = 0): number {
  let n = 0;
  const end = buf.length - PATTERN.length;
  for (let i = start; i <= end; i++) {
    if (buf[i] !== D) continue;
    let ok = true;
    for (let k = 1; k < PATTERN.length; k++) {
      if (buf[i + k] !== PATTERN[k]) {
        ok = false;
        break;
      }
    }
    if (ok) {
      n++;
      i += PATTERN.length - 1;
    }
  }
  return n;
}

interface StreamObservation {
  ok: boolean;
  /** Token events seen (for chat this includes the role event). */
  events: number;
  sawDone: boolean;
  /** Milliseconds from request start to the first token event. */
  ttftMs: number;
  error?: string;
}

/**
 * Read one SSE response body, pushing inter-token gaps (ms) into `gaps`.
 * A match split across two reads is caught by carrying the last 6 bytes.
 */
export async function observeStream(body: ReadableStream<Uint8Array>, startedAt: number, gaps: number[]): Promise<StreamObservation> {
  const reader = body.getReader();
  let events = 0;
  let last = -1;
  let ttftMs = NaN;
  let carry = new Uint8Array(0);
  let sawDone = false;
  const tailLen = PATTERN.length - 1;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const now = performance.now();
    let buf = value;
    if (carry.length > 0) {
      buf = new Uint8Array(carry.length + value.length);
      buf.set(carry, 0);
      buf.set(value, carry.length);
    }
    const k = countTokenEvents(buf);
    carry = buf.length > tailLen ? buf.slice(buf.length - tailLen) : buf.slice();
    if (!sawDone && includesDone(value)) sawDone = true;
    if (k === 0) continue;
    if (last < 0) ttftMs = now - startedAt;
    else {
      gaps.push(now - last);
      for (let j = 1; j < k; j++) gaps.push(0);
    }
    events += k;
    last = now;
  }
  return { ok: sawDone, events, sawDone, ttftMs };
}

const DONE = [91, 68, 79, 78, 69, 93]; // "[DONE]"

function includesDone(buf: Uint8Array): boolean {
  const end = buf.length - DONE.length;
  for (let i = Math.max(0, end - 16); i <= end; i++) {
    let ok = true;
    for (let k = 0; k < DONE.length; k++) {
      if (buf[i + k] !== DONE[k]) {
        ok = false;
        break;
      }
    }
    if (ok) return true;
  }
  return false;
}
