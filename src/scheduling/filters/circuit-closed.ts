/** Filter `circuit-closed`: drops endpoints whose circuit breaker is open after repeated failures. */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const circuitClosed: Filter = {
  name: "circuit-closed",
  consumes: ["circuits"],
  filter: function circuitClosedFilter(_req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const out: EndpointView[] = [];
    for (const e of endpoints) if (!e.circuitOpen) out.push(e);
    return out;
  },
};
