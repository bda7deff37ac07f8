/**
 * LoRA and KV-cache events together: the sim keys an adapter's prompt blocks
 * by the adapter (as vLLM hashes the LoRA into every block), names the
 * adapter on their BlockStored events (lora_id, lora_name), and so the
 * gateway's KV index, which holds base-model blocks only, skips them — while
 * the same prompt without an adapter is indexed and found by its token keys.
 */
import { describe, expect, test } from "bun:test";
import type { BlockStored, KvCacheEvent } from "../../src/engines/kv-events/model.ts";
import { KvBlockTracker } from "../../src/polling/kv-block-tracker.ts";
import { KvBlockIndex } from "../../src/scheduling/kv-block-index.ts";
import { tokenBlockKeys } from "../../src/scheduling/token-blocks.ts";
import { KV_COUNTER, KV_STREAM, KvEventStats } from "../../src/shared/kv-event-stats.ts";
import { EngineCore } from "../../src/sim/engine-core.ts";
import { saltedForAdapter } from "../../src/sim/lora/engine-lora.ts";
import type { SeqAdapter } from "../../src/sim/sequence.ts";
import { NO_FRONTEND } from "../../src/sim/step-time.ts";
import { type PromptTokens, textPrompt } from "../../src/sim/tokens.ts";

const SQL: SeqAdapter = { id: 1, name: "sql" };
const CHAT: SeqAdapter = { id: 2, name: "chat" };
const PROMPT = textPrompt("z".repeat(4 * 70), 16, undefined, 42n); // 70 tokens: 4 full blocks

function core(): EngineCore {
  return new EngineCore(
    { maxNumSeqs: 4, maxNumBatchedTokens: 256, numGpuBlocks: 64, blockSize: 16, maxModelLen: 1024, kvEvents: true, maxLoras: 2 },
    {
      timing: { derived: undefined, derivedScale: 1, flatDecode: { itlMs: 1, batchSlowdown: 0, maxNumSeqs: 4 }, flatPrefill: { msPerToken: 0 } },
      jitter: 0,
      frontendJitterMs: 0,
      frontend: NO_FRONTEND,
      firstTokenDelayMs: 0,
    },
  );
}

/** Run one request to its end; the events its steps recorded. */
function serve(c: EngineCore, prompt: PromptTokens, adapter?: SeqAdapter): KvCacheEvent[] {
  let done = false;
  c.submit(
    {
      prompt,
      ...(adapter ? { adapter } : {}),
      outputTokens: 2,
      finishReason: "length",
      stallAfter: -1,
      cutAfter: -1,
      intervalMs: 0,
      sink: { token() {}, finish: () => (done = true), cut() {} },
    },
    0,
  );
  const events: KvCacheEvent[] = [];
  for (let i = 0; i < 100 && !done; i++) {
    c.advance(c.nextEventAt());
    events.push(...c.kv.takeEvents());
  }
  expect(done).toBe(true);
  return events;
}

const storedOf = (events: KvCacheEvent[]) => events.filter((e): e is BlockStored => e.type === "BlockStored");

describe("an adapter's KV blocks are its own", () => {
  test("salted hashes: the same adapter the same chain, another adapter or the base another; ids untouched", () => {
    const sql = saltedForAdapter(PROMPT, SQL, 16);
    expect(sql.blockHashes).toHaveLength(PROMPT.blockHashes.length);
    expect(sql.blockHashes.every((h) => typeof h === "bigint")).toBe(true);
    expect(saltedForAdapter(PROMPT, SQL, 16).blockHashes).toEqual(sql.blockHashes);
    const chat = saltedForAdapter(PROMPT, CHAT, 16).blockHashes;
    for (let j = 0; j < sql.blockHashes.length; j++) {
      expect(sql.blockHashes[j]).not.toBe(PROMPT.blockHashes[j]!);
      expect(sql.blockHashes[j]).not.toBe(chat[j]!);
    }
    expect(sql.ids).toBe(PROMPT.ids);
  });

  test("the sim names the adapter on its blocks' events, and the gateway's index skips them; the base prompt's blocks are indexed", () => {
    const c = core();
    const base = storedOf(serve(c, PROMPT));
    const lora = storedOf(serve(c, saltedForAdapter(PROMPT, SQL, 16), SQL));
    // The adapter's request found nothing of the base's blocks in the prefix cache: it stored all four again, under its own hashes.
    expect(base.flatMap((e) => e.blockHashes)).toEqual(PROMPT.blockHashes);
    expect(lora.flatMap((e) => e.blockHashes)).toEqual(saltedForAdapter(PROMPT, SQL, 16).blockHashes);
    expect(base.every((e) => e.loraId === null && e.loraName === null)).toBe(true);
    expect(lora.every((e) => e.loraId === SQL.id && e.loraName === SQL.name)).toBe(true);
    expect(lora.flatMap((e) => e.tokenIds)).toEqual(Array.from(PROMPT.ids.subarray(0, 64)));

    const stats = new KvEventStats(4);
    stats.setState(0, KV_STREAM.LIVE);
    stats.setState(1, KV_STREAM.LIVE);
    const index = new KvBlockIndex(1024, stats);
    const tracker = new KvBlockTracker(index, stats);
    tracker.apply(0, { ts: 1, events: base, dataParallelRank: 0 });
    tracker.apply(1, { ts: 1, events: lora, dataParallelRank: 0 });
    const keys = tokenBlockKeys(Array.from(PROMPT.ids));
    expect(index.matchedBlocks(keys, 0)).toBe(4);
    // Same tokens, but the engine would not hit them for a base-model request: not indexed.
    expect(index.matchedBlocks(keys, 1)).toBe(0);
    expect(stats.counter(1, KV_COUNTER.SKIPPED)).toBe(4);
  });
});
