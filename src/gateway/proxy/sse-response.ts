/**
 * How an SSE relay's bytes reach Bun's response (RelayVariant, measured side
 * by side by `llmgw bench relay`): Bun's direct stream (write + flush, no
 * queue: the default), or a pull stream with one enqueue per upstream chunk,
 * or one per event (the earlier design).
 */
import type { RelayVariantName } from "../../config/plugin-names.ts";
import { SseRelay, type RelayOwner, type RelayRecovery } from "./relay.ts";
import type { OpenStream } from "./upstream.ts";

type RelayVariant = RelayVariantName;
export { RELAY_VARIANTS as RELAY_VARIANT_NAMES } from "../../config/plugin-names.ts";

/** The client's response body for an open upstream stream, over the chosen transport; `recovery`: its continuation on another replica if it breaks. */
export function relayBody(x: RelayOwner, open: OpenStream, variant: RelayVariant, recovery?: RelayRecovery): ReadableStream<Uint8Array> {
  const relay = new SseRelay(x, open, variant !== "event", recovery);
  if (variant === "direct") return directStream(relay);
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        // next() resolves only with bytes or at the end: a pull that enqueued
        // nothing would not be called again (WHATWG streams).
        const pieces = await relay.next();
        if (pieces) for (const p of pieces) controller.enqueue(p);
        if (relay.over) controller.close();
      },
      cancel() {
        relay.cancel();
      },
    },
    // One chunk of look-ahead: read upstream only after the client took the previous bytes.
    { highWaterMark: 1 },
  );
}

/**
 * Bun's direct stream: each piece is written straight to the socket and
 * flushed, with no queue in between; a write that returns a promise is the
 * socket pushing back, and the relay reads upstream only once it settles.
 */
function directStream(relay: SseRelay): ReadableStream<Uint8Array> {
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
          controller.flush();
          if (relay.over) break;
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
