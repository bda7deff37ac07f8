/** Filter `ready`: keeps endpoints that answer /health and list the model in /v1/models (weights loaded). */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const ready: Filter = {
  name: "ready",
  consumes: ["readiness"],
  filter: function readyFilter(_req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const out: EndpointView[] = [];
    for (const e of endpoints) if (e.ready) out.push(e);
    return out;
  },
};
