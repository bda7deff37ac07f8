/**
 * A chat on the Redis responses store stores each turn once (a 60-turn chat
 * takes about its own text in Redis memory, not the sum of its growing
 * conversations), and stays whole whatever removes the records it follows:
 * Redis's own expiry (the chain outlives its newest record), llmgw dropping
 * an expired record or evicting past the budget (its conversation is copied
 * into its followers first), a chain longer than the bound, a record of the
 * earlier layout.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { expandedInput, type StoredResponse } from "../../src/jobs/responses-objects.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { MAX_CHAIN_RECORDS, RedisResponsesStore } from "../../src/shared-state/redis-responses-store.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

let redis: RedisConnection;
const BIG = 1e9;

/** Turn n of a chat: its own input (as conversation-state stores it) and its answer. */
function turn(tenant: string, n: number, text: string, extra: Partial<StoredResponse> = {}): StoredResponse {
  const now = Date.now();
  const id = `resp_${n}`;
  const output = [{ type: "message", role: "assistant", content: [{ type: "output_text", text: `answer ${n}` }] }];
  return {
    id,
    tenant,
    createdMs: now + n,
    expiresMs: now + 600_000,
    status: "completed",
    response: JSON.stringify({ id, object: "response", status: "completed", output }),
    input: JSON.stringify([{ id: `msg_${n}`, type: "message", role: "user", content: text }]),
    context: JSON.stringify([{ role: "user", content: text }]),
    ...(n > 1 ? { previousId: `resp_${n - 1}` } : {}),
    ...extra,
  };
}

/** The conversation a follow-up of `id` would be sent, as the user and answer texts. */
async function texts(s: RedisResponsesStore, tenant: string, id: string, nowMs = Date.now()): Promise<string[] | undefined> {
  const c = await s.conversation(tenant, id, nowMs);
  if (c === undefined) return undefined;
  return expandedInput(c.links, []).map((i) => {
    const content = (i as { content: unknown }).content;
    return typeof content === "string" ? content : (content as { text: string }[])[0]!.text;
  });
}

const whole = (n: number, text: (k: number) => string) => Array.from({ length: n }, (_, k) => [text(k + 1), `answer ${k + 1}`]).flat();

/** Redis memory taken by every key under the prefix. */
async function memoryUnder(prefix: string): Promise<number> {
  let cursor = "0";
  let bytes = 0;
  do {
    const [next, keys] = (await redis.send("SCAN", [cursor, "MATCH", `${prefix}*`, "COUNT", "1000"])) as [string, string[]];
    cursor = next;
    for (const key of keys) bytes += Number(await redis.send("MEMORY", ["USAGE", key, "SAMPLES", "0"]));
  } while (cursor !== "0");
  return bytes;
}

describeWithRedis("a chat on redis stores each turn once", () => {
  beforeAll(async () => {
    const server = await startRedisServer();
    redis = new RedisConnection(server.url, { commandTimeoutMs: 10_000 });
    if (!(await redis.connect())) throw new Error("redis did not answer");
  });
  afterAll(async () => {
    redis?.close();
    await stopRedisServers();
  });

  test("a 60-turn chat of 0.46 MB of user text takes about that in Redis, not the sum of its conversations", async () => {
    const s = new RedisResponsesStore(redis, "chat:");
    const text = (n: number) => `${n} ${"x".repeat(7_700)}`;
    for (let n = 1; n <= 60; n++) await s.put(turn("a", n, text(n)), BIG);
    const userBytes = whole(60, text).join("").length;
    const stored = await memoryUnder("chat:");
    console.log(`60-turn chat: ${userBytes} bytes of text, ${stored} bytes in Redis (${(stored / userBytes).toFixed(2)}x)`);
    // Each turn once: the input items and the turn each hold the text once (about 2x, plus keys).
    // Whole conversations per record would be about 30x.
    expect(stored).toBeLessThan(4 * userBytes);
    expect(await texts(s, "a", "resp_60")).toEqual(whole(60, text));
  });

  test("the records a follow-up continues outlive it in Redis, and it stays whole once they expire for llmgw", async () => {
    const s = new RedisResponsesStore(redis, "ttl:");
    const now = Date.now();
    await s.put(turn("a", 1, "q1", { expiresMs: now + 10_000 }), BIG);
    await s.put(turn("a", 2, "q2", { expiresMs: now + 20_000 }), BIG);
    await s.put(turn("a", 3, "q3", { expiresMs: now + 900_000 }), BIG);
    const pttl = (id: string) => redis.send("PTTL", [`ttl:resp:r:1:a:${id}`]).then(Number);
    const tail = await pttl("resp_3");
    expect(tail).toBeGreaterThan(900_000);
    for (const id of ["resp_1", "resp_2"]) expect(await pttl(id)).toBeGreaterThanOrEqual(tail - 5_000);
    expect(await redis.send("PTTL", ["ttl:resp:f:1:a:resp_1"]).then(Number)).toBeGreaterThanOrEqual(tail - 5_000);
    // Past the first two expiries: they are gone for reads, their turns are still the third's history.
    expect(await s.get("a", "resp_1", now + 30_000)).toBeUndefined();
    expect(await texts(s, "a", "resp_3", now + 30_000)).toEqual(whole(3, (k) => `q${k}`));
  });

  test("dropping an expired record copies its conversation into its followers first", async () => {
    const s = new RedisResponsesStore(redis, "drop:");
    const now = Date.now();
    await s.put(turn("a", 1, "q1", { expiresMs: now + 300 }), BIG);
    await s.put(turn("a", 2, "q2"), BIG);
    await s.put(turn("a", 3, "q3"), BIG);
    await Bun.sleep(400);
    await s.put(turn("a", 9, "other", { previousId: undefined }), BIG); // drops resp_1, expired
    expect(Number(await redis.send("EXISTS", ["drop:resp:r:1:a:resp_1"]))).toBe(0);
    expect(await texts(s, "a", "resp_3")).toEqual(whole(3, (k) => `q${k}`));
    expect(await redis.send("HGET", ["drop:resp:r:1:a:resp_2", "prev"])).toBeNull();
  });

  test("evicting a record past the budget copies its conversation into its followers first; the tenant's total stays the sum of its sizes", async () => {
    const s = new RedisResponsesStore(redis, "evict:");
    const now = Date.now();
    // The first record is large for its input items (not part of the conversation): evicting it frees them.
    await s.put(turn("a", 1, "q1", { expiresMs: now + 500_000, input: JSON.stringify([{ id: "m", content: "i".repeat(5_000) }]) }), BIG);
    await s.put(turn("a", 2, "q2"), BIG);
    await s.put(turn("a", 3, "q3"), BIG);
    const before = Number(await redis.send("GET", ["evict:resp:t:total:1:a"]));
    await s.put(turn("a", 9, "other", { previousId: undefined }), before - 2_000);
    expect(Number(await redis.send("EXISTS", ["evict:resp:r:1:a:resp_1"]))).toBe(0);
    expect(Number(await redis.send("EXISTS", ["evict:resp:r:1:a:resp_2", "evict:resp:r:1:a:resp_3"]))).toBe(2);
    expect(await redis.send("HGET", ["evict:resp:r:1:a:resp_2", "prev"])).toBeNull();
    expect(await texts(s, "a", "resp_3")).toEqual(whole(3, (k) => `q${k}`));
    const total = Number(await redis.send("GET", ["evict:resp:t:total:1:a"]));
    const sizes = ((await redis.send("HVALS", ["evict:resp:t:sizes:1:a"])) as string[]).reduce((a, b) => a + Number(b), 0);
    expect(total).toBe(sizes);
  });

  test("a chain longer than the bound starts a new one with the whole conversation", async () => {
    const s = new RedisResponsesStore(redis, "long:");
    const n = MAX_CHAIN_RECORDS + 5;
    for (let k = 1; k <= n; k++) await s.put(turn("a", k, `q${k}`), BIG);
    const prevOf = (k: number) => redis.send("HGET", [`long:resp:r:1:a:resp_${k}`, "prev"]);
    expect(await prevOf(MAX_CHAIN_RECORDS)).toBe(`resp_${MAX_CHAIN_RECORDS - 1}`);
    expect(await prevOf(MAX_CHAIN_RECORDS + 1)).toBeNull();
    expect(await prevOf(MAX_CHAIN_RECORDS + 2)).toBe(`resp_${MAX_CHAIN_RECORDS + 1}`);
    expect(await texts(s, "a", `resp_${n}`)).toEqual(whole(n, (k) => `q${k}`));
  });

  test("a follow-up of a record of the earlier layout (its whole conversation inside its json) holds the whole conversation", async () => {
    const s = new RedisResponsesStore(redis, "old:");
    const now = Date.now();
    const first = turn("a", 1, "q1");
    const body = { id: first.id, tenant: "a", createdMs: now, expiresMs: now + 600_000, response: first.response, input: first.input, context: first.context };
    await redis.send("HSET", ["old:resp:r:1:a:resp_1", "json", JSON.stringify(body), "status", "completed", "v", "1"]);
    expect(await texts(s, "a", "resp_1")).toEqual(["q1", "answer 1"]);
    await s.put(turn("a", 2, "q2"), BIG);
    await s.put(turn("a", 3, "q3"), BIG);
    expect(await redis.send("HGET", ["old:resp:r:1:a:resp_2", "prev"])).toBeNull();
    expect(await s.delete("a", "resp_1")).toBe(true);
    expect(await texts(s, "a", "resp_3")).toEqual(whole(3, (k) => `q${k}`));
  });
});
