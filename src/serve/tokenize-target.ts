/** Where the gateway asks for a prompt's token ids: a ready endpoint of the model whose KV-event stream is live, taking turns. */
import type { EndpointDirectory } from "../admission/endpoint-directory.ts";
import type { EndpointRegistry } from "../gateway/endpoints.ts";
import type { TokenizeTarget } from "../gateway/prompt-tokens.ts";
import { type EndpointTable, I } from "../shared/endpoint-table.ts";
import type { KvEventStats } from "../shared/kv-event-stats.ts";
import type { KvEventsClient } from "./kv-events-client.ts";

export function tokenizeTarget(
  kv: KvEventsClient,
  directory: EndpointDirectory,
  table: EndpointTable,
  stats: KvEventStats,
  registry: Pick<EndpointRegistry, "urlOf" | "upstreamHeadersOf">,
): TokenizeTarget {
  let turn = 0;
  return {
    following: () => kv.following,
    endpointFor(model: string) {
      const serving = directory.serving(model);
      const n = serving.length;
      // Any of them tokenizes the same (one model, one tokenizer): start at a different one each time.
      for (let k = 0; k < n; k++) {
        const d = serving[(turn + k) % n]!;
        if (table.getInt(d.index, I.READY) !== 1 || !stats.live(d.index)) continue;
        turn = (turn + k + 1) % n;
        const url = registry.urlOf(d.index);
        return url === undefined ? undefined : { url, headers: registry.upstreamHeadersOf(d.index) };
      }
      return undefined;
    },
  };
}
