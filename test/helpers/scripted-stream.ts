/** An upstream stream scripted chunk by chunk, for relay tests that need no engine. */
import { defaultReader } from "../../src/gateway/proxy/body-reader.ts";
import { AttemptDeadlines } from "../../src/gateway/proxy/deadlines.ts";
import { type EventClassifier, SseScanner } from "../../src/gateway/proxy/sse-scanner.ts";
import type { OpenStream } from "../../src/gateway/proxy/upstream.ts";

const enc = new TextEncoder();

/** In a script: the engine sends nothing more and keeps the connection open (until the attempt is aborted). */
export const HANG = Symbol("hang");

/**
 * An OpenStream over scripted chunks: an Error entry makes the read fail, as
 * a cut socket does; HANG stalls. Aborting the attempt's deadlines fails the
 * body, as it fails a fetch body.
 */
export function openStreamOf(chunks: (string | Error | typeof HANG)[], classify?: EventClassifier): OpenStream {
  // The first chunk is what upstream.ts read before the relay starts.
  const first = chunks[0] as string;
  let i = 1;
  const deadlines = new AttemptDeadlines(60_000);
  deadlines.armIdle(60_000);
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      deadlines.signal.addEventListener("abort", () => c.error(new Error("aborted")), { once: true });
    },
    pull(c) {
      const next = chunks[i++];
      if (next === HANG) return new Promise<void>(() => {});
      if (next === undefined) c.close();
      else if (next instanceof Error) c.error(next);
      else c.enqueue(enc.encode(next));
    },
  });
  const reader = defaultReader(body);
  const scanner = new SseScanner(classify);
  return {
    ok: true,
    kind: "stream",
    reader,
    scanner,
    deadlines,
    firstEvents: scanner.push(enc.encode(first)),
    malformedDropped: 0,
  };
}
