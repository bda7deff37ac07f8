/** The `kv_events` block's validated form (the wire schema is kv-events-config.ts). */
import type { KvEventsConfig } from "./kv-events-config.ts";
import type { ParsedConfig } from "./schema.ts";

export function resolveKvEventsConfig(c: ParsedConfig): { kvEvents: KvEventsConfig } {
  const k = c.kv_events;
  return {
    kvEvents: {
      indexBlocks: k.index_blocks,
      staleAfterMs: k.stale_after_ms,
      replayTimeoutMs: k.replay_timeout_ms,
      heartbeatIntervalMs: k.heartbeat_interval_ms,
      tokenize: {
        timeoutMs: k.tokenize.timeout_ms,
        minPromptTokens: k.tokenize.min_prompt_tokens,
        cacheBlocks: k.tokenize.cache_blocks,
        maxInflight: k.tokenize.max_inflight,
        cutChars: k.tokenize.cut_chars,
      },
    },
  };
}
