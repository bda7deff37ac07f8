/** The `kv_events` block's validated form and its checks across endpoints (the wire schema is kv-events-config.ts). */
import type { KvEventsConfig } from "./kv-events-config.ts";
import type { ParsedConfig } from "./schema.ts";

export function resolveKvEventsConfig(c: ParsedConfig): { kvEvents: KvEventsConfig } {
  const k = c.kv_events;
  return {
    kvEvents: {
      listen: k.listen ?? null,
      listenMaxPublishers: k.listen_max_publishers,
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

/**
 * An endpoint whose engine connects to the gateway (`kv_events` without
 * `endpoint`) needs the bound socket and a topic of its own: a batch is
 * told apart by its topic alone, so two endpoints sharing one would mix
 * their engines' blocks in one index.
 */
export function kvEventsIssues(c: ParsedConfig): string[] {
  const issues: string[] = [];
  const owner = new Map<string, number>();
  c.endpoints.forEach((e, i) => {
    const k = e.kv_events;
    if (k === undefined || k.endpoint !== undefined) return;
    const key = `endpoints[${i}].kv_events`;
    if (c.kv_events.listen === undefined)
      issues.push(`${key}: without an endpoint to connect to, the engine connects to the gateway: set kv_events.listen (e.g. tcp://*:5557)`);
    if (k.topic === "") {
      issues.push(
        `${key}.topic: expected the engine's topic (kv@<pod>@<model>, as its --kv-events-config names it): on the bound socket it is all that tells engines apart`,
      );
      return;
    }
    const first = owner.get(k.topic);
    if (first !== undefined) issues.push(`${key}.topic: '${k.topic}' is already endpoints[${first}].kv_events.topic (each engine needs a topic of its own)`);
    else owner.set(k.topic, i);
  });
  return issues;
}
