/**
 * GET …/input_items on the Redis store reads what the page returns: a page of
 * 1 item out of 100k (4 MB of items) brings back a few hundred bytes, the
 * items sit in a list with a cursor index, and a record written by the
 * earlier layout (items inside its json) still pages, and moves to the list
 * when it is next written.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { RedisResponsesStore } from "../../src/shared-state/redis-responses-store.ts";
import { describeWithRedis, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

/** Counts the bytes of every reply, as a gateway would parse them. */
class CountingConnection extends RedisConnection {
  replyBytes = 0;
  override async send(command: string, args: string[]): Promise<unknown> {
    const reply = await super.send(command, args);
    this.replyBytes += JSON.stringify(reply ?? null).length;
    return reply;
  }
}

let redis: CountingConnection;
const N = 100_000;

describeWithRedis("input items on redis", () => {
  beforeAll(async () => {
    const server = await startRedisServer();
    redis = new CountingConnection(server.url, { commandTimeoutMs: 10_000 });
    if (!(await redis.connect())) throw new Error("redis did not answer");
  });
  afterAll(async () => {
    redis?.close();
    await stopRedisServers();
  });

  test("a page of 1 item out of 100k reads that page, not the whole record", async () => {
    const s = new RedisResponsesStore(redis, "big:");
    const items = Array.from({ length: N }, (_, i) => ({ id: `msg_${i}`, type: "message", role: "user", content: "x".repeat(16) }));
    const input = JSON.stringify(items);
    const now = Date.now();
    await s.put(
      { id: "resp_big", tenant: "a", createdMs: now, expiresMs: now + 600_000, status: "completed", response: '{"id":"resp_big"}', input, context: "[]" },
      1e9,
    );
    expect(Number(await redis.send("LLEN", ["big:resp:i:1:a:resp_big"]))).toBe(N);
    expect(Number(await redis.send("HLEN", ["big:resp:x:1:a:resp_big"]))).toBe(N);

    const pages: [string | undefined, "asc" | "desc", string[], boolean][] = [
      [undefined, "desc", [`msg_${N - 1}`], true],
      [undefined, "asc", ["msg_0"], true],
      ["msg_50000", "asc", ["msg_50001"], true],
      ["msg_50000", "desc", ["msg_49999"], true],
      [`msg_${N - 1}`, "asc", [], false],
      ["msg_0", "desc", [], false],
    ];
    for (const [after, order, ids, more] of pages) {
      redis.replyBytes = 0;
      const got = await s.inputItems("a", "resp_big", Date.now(), { limit: 1, order, ...(after === undefined ? {} : { after }) });
      expect("page" in got && [(got.page.data as { id: string }[]).map((i) => i.id), got.page.has_more]).toEqual([ids, more]);
      // The whole record is over 4 MB; a page of one item (and the next, for has_more) is a few hundred bytes.
      expect(redis.replyBytes).toBeLessThan(input.length / 1000);
    }
    expect(await s.inputItems("a", "resp_big", Date.now(), { after: "msg_nope", limit: 1, order: "asc" })).toEqual({ missing: "after" });
    expect(await s.inputItems("a", "resp_big", now + 600_000, { limit: 1, order: "asc" })).toEqual({ missing: "response" });
    expect(await s.delete("a", "resp_big")).toBe(true);
    expect(Number(await redis.send("EXISTS", ["big:resp:i:1:a:resp_big", "big:resp:x:1:a:resp_big"]))).toBe(0);
  });

  test("the item keys expire with their record", async () => {
    const s = new RedisResponsesStore(redis, "ttl:");
    const now = Date.now();
    await s.put(
      {
        id: "resp_t",
        tenant: "a",
        createdMs: now,
        expiresMs: now + 600_000,
        status: "completed",
        response: "{}",
        input: '[{"id":"m1"},{"id":"m2"}]',
        context: "[]",
      },
      1e9,
    );
    const ttl = (key: string) => redis.send("PTTL", [key]).then(Number);
    const record = await ttl("ttl:resp:r:1:a:resp_t");
    expect(record).toBeGreaterThan(600_000);
    for (const key of ["ttl:resp:i:1:a:resp_t", "ttl:resp:x:1:a:resp_t"]) expect(Math.abs((await ttl(key)) - record)).toBeLessThan(5_000);
  });

  test("a record of the earlier layout (items inside its json) pages, and moves its items to the list when next written", async () => {
    const s = new RedisResponsesStore(redis, "old:");
    const now = Date.now();
    const body = {
      id: "resp_old",
      tenant: "a",
      createdMs: now,
      expiresMs: now + 600_000,
      response: '{"id":"resp_old","output":[{"content":"a1"}]}',
      input: '[{"id":"m1"},{"id":"m2"},{"id":"m3"}]',
      context: '[{"content":"q1"}]',
    };
    await redis.send("HSET", ["old:resp:r:1:a:resp_old", "json", JSON.stringify(body), "status", "in_progress", "v", "1"]);
    const ids = async (q: { after?: string; limit: number; order: "asc" | "desc" }) => {
      const got = await s.inputItems("a", "resp_old", Date.now(), q);
      return "page" in got ? (got.page.data as { id: string }[]).map((i) => i.id) : got;
    };
    expect(await ids({ limit: 2, order: "desc" })).toEqual(["m3", "m2"]);
    expect(await ids({ after: "m1", limit: 5, order: "asc" })).toEqual(["m2", "m3"]);
    expect((await s.get("a", "resp_old", Date.now()))?.response).toBe(body.response);
    expect(await s.update("a", "resp_old", ["in_progress"], { status: "completed" })).toBeDefined();
    expect(Number(await redis.send("LLEN", ["old:resp:i:1:a:resp_old"]))).toBe(3);
    // The record was written bare, with no expiry: its items get none either (once they got a 1 ms one,
    // and a read a millisecond later found them gone).
    expect(Number(await redis.send("PTTL", ["old:resp:i:1:a:resp_old"]))).toBe(-1);
    expect(await ids({ after: "m3", limit: 2, order: "desc" })).toEqual(["m2", "m1"]);
    expect((await s.get("a", "resp_old", Date.now()))?.status).toBe("completed");
  });
});
