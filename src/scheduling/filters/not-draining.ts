/** Filter `not-draining`: drops endpoints being drained or cordoned; their in-flight work finishes, new work goes elsewhere. */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const notDraining: Filter = {
  name: "not-draining",
  consumes: ["draining"],
  filter: function notDrainingFilter(_req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const out: EndpointView[] = [];
    for (const e of endpoints) if (!e.draining) out.push(e);
    return out;
  },
};
