/** The WAL checkpoint worker: a thin shell over src/jobs/wal-checkpoint.ts. */
import { runCheckpoints, type ToCheckpointer } from "../src/jobs/wal-checkpoint.ts";

declare const self: Worker;

let stop: (() => void) | undefined;

self.onmessage = (event: MessageEvent<ToCheckpointer>) => {
  const msg = event.data;
  switch (msg.type) {
    case "start":
      stop ??= runCheckpoints(msg.path, msg.intervalMs, (checkpointed) => self.postMessage({ type: "checkpointed", pages: checkpointed }));
      return;
    case "stop":
      stop?.();
      stop = undefined;
      self.postMessage({ type: "stopped" });
      return;
    default: {
      const unreachable: never = msg;
      throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
    }
  }
};
