/** Filter `gpu-healthy`: drops endpoints with a GPU reporting a fault (XID, ECC) in DCGM metrics. */
import type { EndpointView, Filter, RequestView } from "../types.ts";

export const gpuHealthy: Filter = {
  name: "gpu-healthy",
  consumes: ["gpu-faults"],
  filter: function gpuHealthyFilter(_req: RequestView, endpoints: readonly EndpointView[]): EndpointView[] {
    const out: EndpointView[] = [];
    for (const e of endpoints) if (!e.gpuFaulted) out.push(e);
    return out;
  },
};
