/**
 * Filter `serves-adapter`: for a request naming a LoRA adapter, keeps the
 * endpoints that list it in /v1/models — vLLM answers 404 for an adapter it
 * has not registered, however idle it is. Other requests pass untouched.
 */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const servesAdapter: Filter = {
  name: "serves-adapter",
  consumes: ["lora"],
  filter: function servesAdapterFilter(req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    if (req.adapter === undefined) return [...endpoints];
    const out: EndpointView[] = [];
    for (const e of endpoints) if (e.adapter?.registered === true) out.push(e);
    return out;
  },
};
