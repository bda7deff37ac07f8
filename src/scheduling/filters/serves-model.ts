/** Filter `serves-model`: keeps endpoints whose model list includes the request's canonical model. */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const servesModel: Filter = {
  name: "serves-model",
  consumes: ["models"],
  filter: function servesModelFilter(req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const out: EndpointView[] = [];
    for (const e of endpoints) if (e.models.includes(req.model)) out.push(e);
    return out;
  },
};
