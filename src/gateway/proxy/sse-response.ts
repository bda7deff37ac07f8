/**
 * How an SSE relay's bytes reach Bun's response: Bun's direct stream, each
 * piece written to the socket and flushed, with no queue in between.
 */
import { type RelayOwner, type RelayRecovery, SseRelay } from "./relay.ts";
import type { OpenStream } from "./upstream.ts";

/**
 * The client's response body for an open upstream stream; `recovery`: its
 * continuation on another replica if it breaks. A write that returns a
 * promise is the socket pushing back, and the relay reads upstream only once
 * it settles. (Measured against a pull stream with one enqueue per upstream
 * chunk or per event: the direct stream costs the least main-thread CPU per
 * request; docs/benchmarks.md.)
 */
export function relayBody(x: RelayOwner, open: OpenStream, recovery?: RelayRecovery): ReadableStream<Uint8Array> {
  const relay = new SseRelay(x, open, recovery);
  return new ReadableStream<Uint8Array>({
    type: "direct",
    async pull(controller) {
      try {
        for (;;) {
          const pieces = await relay.next();
          if (!pieces) break;
          for (const p of pieces) {
            const w = controller.write(p);
            if (w instanceof Promise) await w;
          }
          // The last pieces go out with the end of the body: close() writes
          // them and the terminating chunk together (one send, not two).
          if (relay.over) break;
          controller.flush();
        }
        controller.close();
      } catch {
        // The client is gone (a write to a closed response): cancel() ends the request.
        relay.cancel();
      }
    },
    cancel() {
      relay.cancel();
    },
  });
}
