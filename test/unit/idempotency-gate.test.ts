/** Idempotent replay over the sqlite store: byte-for-byte replay (JSON and SSE), 422 on another body, wait-then-409 for a concurrent duplicate, nothing kept from failures. */
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { type IdempotencyCheck, IdempotencyGate, REPLAY_HEADER } from "../../src/jobs/idempotency-gate.ts";
import { SqliteIdempotencyStore } from "../../src/jobs/idempotency-store.ts";
import { LlmgwError } from "../../src/shared/errors.ts";

const CFG = { ttlMs: 60_000, waitMs: 200, maxResponseBytes: 64 * 1024 };

function setup(cfg: Partial<typeof CFG> = {}, now?: () => number) {
  const store = new SqliteIdempotencyStore(new Database(":memory:", { strict: true }));
  return { store, gate: new IdempotencyGate(store, { ...CFG, ...cfg }, { lockMs: 30_000, now }) };
}

const enc = new TextEncoder();

function post(key: string | null, body: string, path = "/v1/chat/completions"): [Request, Uint8Array] {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (key !== null) headers["idempotency-key"] = key;
  return [new Request(`http://gw${path}`, { method: "POST", headers, body }), enc.encode(body)];
}

/** Run the gate as the gateway would: replay, or call `handler` and relay its answer through the recorder. */
async function serve(
  gate: IdempotencyGate,
  tenant: string,
  key: string | null,
  body: string,
  handler: () => Response | Promise<Response>,
  path?: string,
): Promise<Response> {
  const [req, raw] = post(key, body, path);
  let check: IdempotencyCheck;
  try {
    check = await gate.check(req, tenant, raw);
  } catch (err) {
    if (err instanceof LlmgwError) return new Response(JSON.stringify(err.toBody()), { status: err.status });
    throw err;
  }
  if (check.kind === "replay") return check.response;
  const res = await handler();
  return check.kind === "run" ? check.record(res) : res;
}

function sse(events: string[]): Response {
  const stream = new ReadableStream<Uint8Array>({
    async start(c) {
      for (const e of events) {
        c.enqueue(enc.encode(`data: ${e}\n\n`));
        await Bun.sleep(1);
      }
      c.close();
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream", "x-request-id": "first" } });
}

const settle = () => Bun.sleep(5);

describe("idempotency gate", () => {
  test("a retry with the same key and body replays the answer byte for byte, once run", async () => {
    const { gate } = setup();
    let runs = 0;
    const handler = () => (
      runs++,
      new Response(`{"id":"chatcmpl-${runs}","n":${Math.random()}}`, {
        headers: { "content-type": "application/json", "x-request-id": "r1", "x-ratelimit-remaining-requests": "9" },
      })
    );
    const first = await (await serve(gate, "t", "k1", '{"a":1}', handler)).text();
    await settle();
    const again = await serve(gate, "t", "k1", '{"a":1}', handler);
    expect(await again.text()).toBe(first);
    expect(again.headers.get(REPLAY_HEADER)).toBe("true");
    expect(again.headers.get("x-request-id")).toBe("r1");
    expect(again.headers.get("x-ratelimit-remaining-requests")).toBeNull(); // quota state is not replayed
    expect(runs).toBe(1);
    expect(gate.replays).toBe(1);
    // Another tenant's same key is its own.
    await serve(gate, "other", "k1", '{"a":1}', handler);
    expect(runs).toBe(2);
    // No key: the gate does not apply.
    await serve(gate, "t", null, '{"a":1}', handler);
    await serve(gate, "t", null, '{"a":1}', handler);
    expect(runs).toBe(4);
  });

  test("a stream is replayed as the recorded events; a stream ending in an error event is not kept", async () => {
    const { gate } = setup();
    let runs = 0;
    const events = ['{"choices":[{"delta":{"content":"a"}}]}', '{"choices":[{"delta":{"content":"b"}}]}', "[DONE]"];
    const first = await (await serve(gate, "t", "s1", "{}", () => (runs++, sse(events)))).text();
    expect(first).toBe(events.map((e) => `data: ${e}\n\n`).join(""));
    await settle();
    const replay = await serve(gate, "t", "s1", "{}", () => (runs++, sse(events)));
    expect(replay.headers.get("content-type")).toBe("text/event-stream");
    expect(await replay.text()).toBe(first);
    expect(runs).toBe(1);

    const broken = ['{"choices":[{"delta":{"content":"a"}}]}', '{"error":{"code":"UPSTREAM_IDLE_TIMEOUT"}}', "[DONE]"];
    await (await serve(gate, "t", "s2", "{}", () => (runs++, sse(broken)))).text();
    await settle();
    await (await serve(gate, "t", "s2", "{}", () => (runs++, sse(events)))).text();
    expect(runs).toBe(3);
  });

  test("the same key with another body or route is a 422", async () => {
    const { gate } = setup();
    await (await serve(gate, "t", "k", '{"a":1}', () => new Response("{}"))).text();
    await settle();
    for (const [body, path] of [
      ['{"a":2}', undefined],
      ['{"a":1}', "/v1/completions"],
    ] as const) {
      const res = await serve(gate, "t", "k", body, () => new Response("{}"), path);
      expect(res.status).toBe(422);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("IDEMPOTENCY_KEY_REUSED");
    }
  });

  test("a duplicate while the first runs waits for it and replays; past wait_ms it gets 409", async () => {
    const { gate } = setup({ waitMs: 2_000 });
    let release: () => void = () => {};
    const slow = new Promise<void>((r) => (release = r));
    let runs = 0;
    const handler = async () => {
      runs++;
      await slow;
      return new Response('{"done":true}');
    };
    const first = serve(gate, "t", "k", "{}", handler);
    await Bun.sleep(20);
    const second = serve(gate, "t", "k", "{}", handler);
    await Bun.sleep(50);
    release();
    expect(await (await first).text()).toBe('{"done":true}');
    const dup = await second;
    expect(dup.headers.get(REPLAY_HEADER)).toBe("true");
    expect(await dup.text()).toBe('{"done":true}');
    expect(runs).toBe(1);

    const short = setup({ waitMs: 50 });
    void serve(short.gate, "t", "k", "{}", () => new Promise<Response>(() => {}));
    await Bun.sleep(10);
    const started = Date.now();
    const refused = await serve(short.gate, "t", "k", "{}", () => new Response("{}"));
    expect(refused.status).toBe(409);
    expect(Date.now() - started).toBeGreaterThanOrEqual(45);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("IDEMPOTENCY_KEY_IN_USE");
  });

  test("failures, oversized answers and cancelled streams are not kept: the retry runs again", async () => {
    const { gate } = setup({ maxResponseBytes: 1024 });
    let runs = 0;
    await serve(gate, "t", "e", "{}", () => (runs++, new Response('{"error":{}}', { status: 503 })));
    await settle();
    await serve(gate, "t", "e", "{}", () => (runs++, new Response("{}")));
    expect(runs).toBe(2);
    await (await serve(gate, "t", "big", "{}", () => (runs++, new Response("x".repeat(2048))))).text();
    await settle();
    await (await serve(gate, "t", "big", "{}", () => (runs++, new Response("{}")))).text();
    expect(runs).toBe(4);
    const res = await serve(gate, "t", "gone", "{}", () => (runs++, sse(['{"a":1}', '{"a":2}', "[DONE]"])));
    await res.body!.getReader().cancel();
    await settle();
    await (await serve(gate, "t", "gone", "{}", () => (runs++, new Response("{}")))).text();
    expect(runs).toBe(6);
  });

  test("records expire after ttl; a key held by a crashed process is freed at start", async () => {
    let now = 1_000;
    const { gate, store } = setup({ ttlMs: 10_000 }, () => now);
    let runs = 0;
    await (await serve(gate, "t", "k", "{}", () => (runs++, new Response("{}")))).text();
    await settle();
    now += 9_999;
    await (await serve(gate, "t", "k", "{}", () => (runs++, new Response("{}")))).text();
    expect(runs).toBe(1);
    now += 2;
    await (await serve(gate, "t", "k", "{}", () => (runs++, new Response("{}")))).text();
    expect(runs).toBe(2);
    await store.begin("t", "held", "fp", now, now + 60_000);
    expect(await store.releaseAllRunning()).toBe(1);
    expect((await store.begin("t", "held", "fp", now, now + 60_000)).kind).toBe("started");
  });

  test("a malformed key is a 400", async () => {
    const { gate } = setup();
    const res = await serve(gate, "t", "has space", "{}", () => new Response("{}"));
    expect(res.status).toBe(400);
  });
});
