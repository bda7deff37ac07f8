/** The health worker: a thin shell over src/polling/health-service.ts. */

import { HealthService } from "../src/polling/health-service.ts";
import type { FromHealth, ToHealth } from "../src/protocol/health-messages.ts";
import { EndpointTable, Signals } from "../src/shared/endpoint-table.ts";
import { GpuSaturationTable } from "../src/shared/gpu-saturation-table.ts";
import { LoraTable } from "../src/shared/lora-table.ts";

declare const self: Worker;

let service: HealthService | undefined;
/** Agents announced before init (the gateway sends init first; this keeps the order from mattering). */
let pendingAgents: Extract<ToHealth, { type: "agents" }> | undefined;

self.onmessage = (event: MessageEvent<ToHealth>) => {
  const msg = event.data;
  switch (msg.type) {
    case "init": {
      const table = new EndpointTable(msg.maxEndpoints, msg.buffer);
      const gpu =
        msg.gpuHealth === null ? undefined : { config: msg.gpuHealth, table: new GpuSaturationTable(msg.gpuSaturation.byteLength / 8, msg.gpuSaturation) };
      const lora = msg.lora ? new LoraTable(msg.maxEndpoints, msg.lora) : undefined;
      service = new HealthService(table, msg.endpoints, msg.health, (out: FromHealth) => self.postMessage(out), new Signals(msg.signals), gpu, lora);
      service.start();
      if (pendingAgents) service.setAgents(pendingAgents.agents, pendingAgents.settings);
      self.postMessage({ type: "ready" } satisfies FromHealth);
      return;
    }
    case "endpoint":
      if (msg.endpoint === null) service?.remove(msg.index);
      else service?.add(msg.endpoint);
      return;
    case "agents":
      if (service) service.setAgents(msg.agents, msg.settings);
      else pendingAgents = msg;
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
