/** The KV-events worker: a thin shell over src/polling/kv-events-service.ts. */

import { KvEventsService } from "../src/polling/kv-events-service.ts";
import type { FromKvEvents, ToKvEvents } from "../src/protocol/kv-events-messages.ts";
import { KvBlockIndex } from "../src/scheduling/kv-block-index.ts";
import { KvEventStats } from "../src/shared/kv-event-stats.ts";

declare const self: Worker;

let service: KvEventsService | undefined;

self.onmessage = (event: MessageEvent<ToKvEvents>) => {
  const msg = event.data;
  switch (msg.type) {
    case "init": {
      const stats = new KvEventStats(msg.slots, msg.stats);
      service = new KvEventsService(new KvBlockIndex(msg.capacity, stats, msg.index), stats, msg.settings, (n) =>
        self.postMessage({ type: "note", ...n } satisfies FromKvEvents),
      );
      service.start();
      self.postMessage({ type: "ready" } satisfies FromKvEvents);
      return;
    }
    case "follow":
      service?.follow(msg.slot, msg.id, msg.source);
      return;
    case "unfollow":
      service?.unfollow(msg.slot);
      return;
    case "stop":
      service?.stop();
      self.postMessage({ type: "ready" } satisfies FromKvEvents);
      return;
    default: {
      const unreachable: never = msg;
      throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
    }
  }
};
