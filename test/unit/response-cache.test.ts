/** Response cache: which requests are cacheable, the normalised key, the byte-bounded LRU, hit/miss/bypass and tenant isolation. */
import { describe, expect, test } from "bun:test";
import { canonicalJson, isDeterministic, responseCacheKey } from "../../src/cache/cache-key.ts";
import { LruByteCache } from "../../src/cache/lru-byte-cache.ts";
import { CACHE_HEADER, type CacheLookup, ResponseCache } from "../../src/cache/response-cache-store.ts";

const CFG = { models: ["m"], maxBytes: 64 * 1024, maxEntryBytes: 8 * 1024, ttlMs: 60_000 };
const chat = (extra: Record<string, unknown> = {}) => ({ model: "m", messages: [{ role: "user", content: "hi" }], temperature: 0, ...extra });

describe("cache key", () => {
  test("deterministic: temperature 0, an integer seed, or embeddings", () => {
    expect(isDeterministic("chat", chat())).toBe(true);
    expect(isDeterministic("chat", chat({ temperature: 0.7, seed: 42 }))).toBe(true);
    expect(isDeterministic("chat", chat({ temperature: undefined }))).toBe(false); // OpenAI's default is 1
    expect(isDeterministic("completions", { prompt: "x", temperature: 0.2, seed: 1.5 })).toBe(false);
    expect(isDeterministic("embeddings", { input: "x" })).toBe(true);
  });

  test("normalised: key order, caller-only fields and aliases do not matter; tenant, route and content do", () => {
    const k = responseCacheKey("t", "chat", "m", chat());
    expect(canonicalJson({ b: 1, a: [{ d: 2, c: 1 }] })).toBe('{"a":[{"c":1,"d":2}],"b":1}');
    expect(responseCacheKey("t", "chat", "m", { temperature: 0, messages: [{ content: "hi", role: "user" }], model: "alias-of-m", user: "u1" })).toBe(k!);
    expect(responseCacheKey("other", "chat", "m", chat())).not.toBe(k!);
    expect(responseCacheKey("t", "completions", "m", chat())).not.toBe(k!);
    expect(responseCacheKey("t", "chat", "m", chat({ max_tokens: 5 }))).not.toBe(k!);
    expect(responseCacheKey("t", "chat", "m", chat({ messages: [{ role: "user", content: "hi!" }] }))).not.toBe(k!);
    expect(responseCacheKey("t", "chat", "m", chat({ temperature: 1 }))).toBeUndefined();
  });
});

describe("byte-bounded LRU", () => {
  test("evicts the least recently used to fit, refuses what alone exceeds the budget, expires entries", () => {
    const lru = new LruByteCache<string>(100);
    lru.set("a", "A", 40, 1_000);
    lru.set("b", "B", 40, 1_000);
    expect(lru.get("a", 0)).toBe("A"); // a is now the most recent
    lru.set("c", "C", 40, 1_000); // b goes
    expect(lru.get("b", 0)).toBeUndefined();
    expect([lru.get("a", 0), lru.get("c", 0)]).toEqual(["A", "C"]);
    expect(lru.bytes).toBe(80);
    expect(lru.set("huge", "H", 101, 1_000)).toBe(false);
    expect(lru.size).toBe(2);
    expect(lru.get("a", 1_000)).toBeUndefined();
    expect(lru.bytes).toBe(40);
  });
});

describe("response cache", () => {
  const lookup = (tenant: string, body: Record<string, unknown>, model = "m"): CacheLookup => ({
    tenant,
    route: "chat",
    requestedModel: model,
    model: "m",
    body,
  });

  async function serve(cache: ResponseCache, q: CacheLookup, answer: () => Response): Promise<[Response, number]> {
    let engine = 0;
    const c = await cache.check(q);
    if (c.kind === "hit") return [c.response, engine];
    engine++;
    const res = answer();
    return [c.kind === "miss" ? c.record(res) : res, engine];
  }

  test("miss then hit, byte for byte, with x-llmgw-cache; per tenant; only opted-in deterministic requests", async () => {
    const cache = new ResponseCache(CFG);
    const body = '{"id":"chatcmpl-1","choices":[{"message":{"content":"hello"}}]}';
    const [miss, e1] = await serve(cache, lookup("t", chat()), () => new Response(body, { headers: { "content-type": "application/json" } }));
    expect(miss.headers.get(CACHE_HEADER)).toBe("miss");
    expect(await miss.text()).toBe(body);
    await Bun.sleep(1);
    const [hit, e2] = await serve(cache, lookup("t", chat({ user: "someone" }), "alias"), () => new Response("other"));
    expect(hit.headers.get(CACHE_HEADER)).toBe("hit");
    expect(hit.headers.get("content-type")).toBe("application/json");
    expect(await hit.text()).toBe(body);
    expect([e1, e2]).toEqual([1, 0]);
    // Another tenant never sees it.
    const [isolated, e3] = await serve(cache, lookup("u", chat()), () => new Response("for u"));
    expect(isolated.headers.get(CACHE_HEADER)).toBe("miss");
    expect([await isolated.text(), e3]).toEqual(["for u", 1]);
    expect(cache.stats()).toEqual({ hits: 1, misses: 2, bytes: expect.any(Number) });
    expect(cache.stats().bytes).toBeGreaterThan(body.length);
    // Not deterministic, or not opted in: bypass, no header.
    expect((await cache.check(lookup("t", chat({ temperature: 0.5 })))).kind).toBe("bypass");
    expect((await cache.check({ ...lookup("t", chat()), model: "n", requestedModel: "n" })).kind).toBe("bypass");
    expect(new ResponseCache({ ...CFG, models: [] }).off).toBe(true);
  });

  test("errors and oversized answers are not cached; a stream is replayed as its recorded events", async () => {
    const cache = new ResponseCache(CFG);
    await (await serve(cache, lookup("t", chat({ n: 1 })), () => new Response('{"error":{}}', { status: 500 })))[0].text();
    await (await serve(cache, lookup("t", chat({ n: 2 })), () => new Response("x".repeat(CFG.maxEntryBytes + 1))))[0].text();
    await Bun.sleep(1);
    expect((await cache.check(lookup("t", chat({ n: 1 })))).kind).toBe("miss");
    expect((await cache.check(lookup("t", chat({ n: 2 })))).kind).toBe("miss");
    const sse = 'data: {"a":1}\n\ndata: [DONE]\n\n';
    const stream = () => new Response(new Blob([sse]).stream(), { headers: { "content-type": "text/event-stream" } });
    await (await serve(cache, lookup("t", chat({ stream: true })), stream))[0].text();
    await Bun.sleep(1);
    const [hit] = await serve(cache, lookup("t", chat({ stream: true })), () => new Response("no"));
    expect(await hit.text()).toBe(sse);
  });
});
