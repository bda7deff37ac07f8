/** Where the gateway asks for a prompt's token ids: a ready endpoint of the model whose KV-event stream is live, taking turns. */
import type { EndpointDirectory } from "../admission/endpoint-directory.ts";
import type { TokenizeTarget } from "../gateway/prompt-tokens.ts";
import { type EndpointTable, I } from "../shared/endpoint-table.ts";
import type { KvEventStats } from "../shared/kv-event-stats.ts";
import type { KvEventsClient } from "./kv-events-client.ts";

export function tokenizeTarget(
  kv: KvEventsClient,
  directory: EndpointDirectory,
  table: EndpointTable,
  stats: KvEventStats,
  urlOf: (index: number) => string | undefined,
): TokenizeTarget {
  let turn = 0;
  return {
    following: () => kv.following,
    urlFor(model: string): string | undefined {
      const serving = directory.serving(model);
      const n = serving.length;
      // Any of them tokenizes the same (one model, one tokenizer): start at a different one each time.
      for (let k = 0; k < n; k++) {
        const d = serving[(turn + k) % n]!;
        if (table.getInt(d.index, I.READY) !== 1 || !stats.live(d.index)) continue;
        turn = (turn + k + 1) % n;
        return urlOf(d.index);
      }
      return undefined;
    },
  };
}
