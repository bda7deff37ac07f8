/** The scheduler worker: a thin shell over src/admission/worker-loop.ts. */

import { SchedulerWorkerLoop } from "../src/admission/worker-loop.ts";
import type { FromScheduler, ToScheduler } from "../src/protocol/scheduler-messages.ts";

declare const self: Worker;

let loop: SchedulerWorkerLoop | undefined;

self.onmessage = (event: MessageEvent<ToScheduler>) => {
  const msg = event.data;
  if (msg.type === "init") {
    loop = new SchedulerWorkerLoop(msg, (out: FromScheduler) => self.postMessage(out));
    self.postMessage({ type: "ready" } satisfies FromScheduler);
    return;
  }
  if (!loop) throw new Error(`scheduler worker got '${msg.type}' before init`);
  loop.handle(msg);
};
