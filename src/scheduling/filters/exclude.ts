/**
 * Built-in filter `exclude`: drops the endpoints a retry already tried
 * (`req.exclude`). Not a config name: the profile always runs it first, so a
 * retry can never land on the endpoint that just failed, whatever filters
 * the operator configured.
 */
import type { EndpointView, Filter, RequestView } from "../types.ts";

/** The key under which the profile reports this filter's drops in Decision.drops. */
export const EXCLUDE_FILTER_NAME = "exclude";

export const excludeTried: Filter = {
  name: EXCLUDE_FILTER_NAME,
  consumes: ["tried"],
  filter: function excludeTriedFilter(req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const tried = req.exclude;
    if (tried === undefined || tried.size === 0) return endpoints.slice();
    const out: EndpointView[] = [];
    for (const e of endpoints) if (!tried.has(e.index)) out.push(e);
    return out;
  },
};
