/** The health worker: a thin shell over src/health/health-service.ts. */
import type { FromHealth, ToHealth } from "../src/protocol/health-messages.ts";
import { HealthService } from "../src/health/health-service.ts";
import { EndpointTable, Signals } from "../src/shared/endpoint-table.ts";

declare const self: Worker;

let service: HealthService | undefined;

self.onmessage = (event: MessageEvent<ToHealth>) => {
  const msg = event.data;
  switch (msg.type) {
    case "init": {
      const table = new EndpointTable(msg.maxEndpoints, msg.buffer);
      service = new HealthService(table, msg.endpoints, msg.health, (out: FromHealth) => self.postMessage(out), new Signals(msg.signals));
      service.start();
      self.postMessage({ type: "ready" } satisfies FromHealth);
      return;
    }
    case "endpoint":
      if (msg.endpoint === null) service?.remove(msg.index);
      else service?.add(msg.endpoint);
      return;
    case "stop":
      void service?.stop().then(() => self.postMessage({ type: "ready" } satisfies FromHealth));
      return;
    default: {
      const unreachable: never = msg;
      throw new Error(`unknown message ${JSON.stringify(unreachable)}`);
    }
  }
};
