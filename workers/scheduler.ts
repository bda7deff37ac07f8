/** The scheduler worker: a thin shell over src/scheduler/service.ts. */
import type { FromScheduler, ToScheduler } from "../src/protocol/scheduler-messages.ts";
import { SchedulerService } from "../src/scheduler/service.ts";
import { EndpointTable } from "../src/shared/endpoint-table.ts";

declare const self: Worker;

let service: SchedulerService | undefined;

function reply(msg: FromScheduler): void {
  self.postMessage(msg);
}

self.onmessage = (event: MessageEvent<ToScheduler>) => {
  const msg = event.data;
  if (msg.type === "init") {
    const table = new EndpointTable(msg.endpoints.length, msg.buffer);
    service = new SchedulerService(table, msg.endpoints, msg.scheduling, msg.staleAfterMs);
    reply({ type: "ready" });
    return;
  }
  if (!service) throw new Error(`scheduler worker got '${msg.type}' before init`);
  const out = service.handle(msg);
  if (out) reply(out);
};
