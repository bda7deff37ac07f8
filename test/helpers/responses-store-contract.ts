/**
 * The ResponsesStore contract (src/jobs/responses-store.ts) as one suite,
 * run against the embedded bun:sqlite backend and Redis: records per tenant
 * until they expire, each tenant's byte budget evicting its oldest, status
 * compare-and-set, background claims with leases that lapse and renew,
 * input items paged, a follow-up's conversation read back whole (also once
 * the response it follows is deleted).
 * Times are real (Redis expires records on its own clock).
 */
import { describe, expect, test } from "bun:test";
import { expandedInput, type StoredResponse } from "../../src/jobs/responses-objects.ts";
import type { ResponsesStore } from "../../src/jobs/responses-store.ts";

const BIG = 1_000_000;

function record(tenant: string, id: string, extra: Partial<StoredResponse> = {}, createdMs = Date.now()): StoredResponse {
  return {
    id,
    tenant,
    createdMs,
    expiresMs: Date.now() + 60_000,
    status: "completed",
    response: JSON.stringify({ id, object: "response", status: "completed" }),
    input: "[]",
    context: "[]",
    ...extra,
  };
}

export function responsesStoreContract(backend: string, open: () => ResponsesStore): void {
  describe(`ResponsesStore contract: ${backend}`, () => {
    test("a record is its tenant's alone, until it expires or is deleted", async () => {
      const s = open();
      const now = Date.now();
      await s.put(record("a", "resp_1", { input: '[{"id":"msg_1"}]' }), BIG);
      const got = await s.get("a", "resp_1", now);
      expect(await s.inputItems("a", "resp_1", now, { limit: 5, order: "asc" })).toEqual({
        page: { object: "list", data: [{ id: "msg_1" }], first_id: "msg_1", last_id: "msg_1", has_more: false },
      });
      expect(got?.status).toBe("completed");
      expect(await s.get("b", "resp_1", now)).toBeUndefined();
      expect(await s.get("a", "resp_1", got!.expiresMs)).toBeUndefined(); // expired at that instant
      expect(await s.delete("b", "resp_1")).toBe(false);
      expect(await s.delete("a", "resp_1")).toBe(true);
      expect(await s.get("a", "resp_1", now)).toBeUndefined();
      expect(await s.delete("a", "resp_1")).toBe(false);
    });

    test("a tenant's records past its byte budget evict its oldest, never the one just stored, never another tenant's", async () => {
      const s = open();
      const pad = "x".repeat(1_000);
      const t0 = Date.now();
      await s.put(record("other", "resp_o", { context: pad }, t0), 1_500);
      for (let i = 0; i < 4; i++) await s.put(record("a", `resp_${i}`, { context: pad }, t0 + i), 2_500);
      const kept = [];
      for (let i = 0; i < 4; i++) if (await s.get("a", `resp_${i}`, Date.now())) kept.push(i);
      expect(kept).toEqual([2, 3]);
      expect(await s.get("other", "resp_o", Date.now())).toBeDefined();
      // Alone over the budget: still stored (the budget evicts older ones, not the newest).
      await s.put(record("a", "resp_big", { context: "y".repeat(5_000) }, t0 + 10), 2_500);
      expect(await s.get("a", "resp_big", Date.now())).toBeDefined();
      expect(await s.get("a", "resp_3", Date.now())).toBeUndefined();
    });

    test("update is a compare-and-set on the status", async () => {
      const s = open();
      await s.put(record("a", "resp_bg", { status: "queued", request: '{"body":{}}' }), BIG);
      expect(await s.update("a", "resp_bg", ["in_progress"], { status: "completed" })).toBeUndefined();
      const running = await s.update("a", "resp_bg", ["queued"], { status: "in_progress", response: '{"status":"in_progress"}' });
      expect(running?.status).toBe("in_progress");
      expect(running?.request).toBe('{"body":{}}');
      const done = await s.update("a", "resp_bg", ["queued", "in_progress"], {
        status: "completed",
        response: '{"status":"completed"}',
        context: '["c"]',
        request: null,
        owner: null,
        leaseUntilMs: null,
      });
      expect(done?.request).toBeUndefined();
      const read = await s.get("a", "resp_bg", Date.now());
      expect([read?.status, read?.response, read?.request]).toEqual(["completed", '{"status":"completed"}', undefined]);
      const conversation = await s.conversation("a", "resp_bg", Date.now());
      expect([conversation?.status, expandedInput(conversation!.links, [])]).toEqual(["completed", ["c"]]);
      expect(await s.update("a", "resp_bg", ["queued", "in_progress"], { status: "cancelled" })).toBeUndefined();
      expect(await s.update("b", "resp_bg", ["completed"], { status: "cancelled" })).toBeUndefined();
    });

    test("background responses are claimed once per lease; a lapsed lease lets another runner take one; finished ones are never claimed", async () => {
      const s = open();
      const now = Date.now();
      await s.put(record("a", "resp_q1", { status: "queued", request: "{}" }, now - 2), BIG);
      await s.put(record("b", "resp_q2", { status: "queued", request: "{}" }, now - 1), BIG);
      await s.put(record("a", "resp_done", {}, now), BIG);
      const first = await s.claim("r1", now, now + 1_000, 10);
      expect(first.map((r) => r.id).sort()).toEqual(["resp_q1", "resp_q2"]);
      expect(await s.claim("r2", now + 10, now + 1_010, 10)).toEqual([]);
      await s.renew("r1", [{ tenant: "a", id: "resp_q1" }], now + 5_000);
      // r1 died holding resp_q2: its lease lapses; resp_q1's was renewed.
      const second = await s.claim("r2", now + 2_000, now + 3_000, 10);
      expect(second.map((r) => r.id)).toEqual(["resp_q2"]);
      expect(second[0]!.owner).toBe("r2");
      await s.update("b", "resp_q2", ["queued", "in_progress"], { status: "completed", request: null, owner: null, leaseUntilMs: null });
      expect(await s.claim("r3", now + 10_000, now + 11_000, 10)).toEqual([expect.objectContaining({ id: "resp_q1" })]);
      expect(await s.claim("r4", now + 20_000, now + 21_000, 0)).toEqual([]);
    });

    test("input items page in either order after a cursor; an unknown cursor or response is missing", async () => {
      const s = open();
      const now = Date.now();
      const items = Array.from({ length: 5 }, (_, i) => ({ id: `msg_${i}`, type: "message" }));
      await s.put(record("a", "resp_items", { input: JSON.stringify(items) }), BIG);
      const ids = async (q: { after?: string; limit: number; order: "asc" | "desc" }) => {
        const got = await s.inputItems("a", "resp_items", now, q);
        return "page" in got ? [(got.page.data as { id: string }[]).map((i) => i.id), got.page.has_more] : got;
      };
      expect(await ids({ limit: 2, order: "desc" })).toEqual([["msg_4", "msg_3"], true]);
      expect(await ids({ after: "msg_3", limit: 2, order: "desc" })).toEqual([["msg_2", "msg_1"], true]);
      expect(await ids({ after: "msg_1", limit: 2, order: "desc" })).toEqual([["msg_0"], false]);
      expect(await ids({ after: "msg_2", limit: 2, order: "asc" })).toEqual([["msg_3", "msg_4"], false]);
      expect(await ids({ after: "msg_9", limit: 2, order: "asc" })).toEqual({ missing: "after" });
      expect(await s.inputItems("b", "resp_items", now, { limit: 2, order: "asc" })).toEqual({ missing: "response" });
    });

    test("a follow-up's conversation reads back whole, and stays whole once the responses it follows are deleted", async () => {
      const s = open();
      const now = Date.now();
      const turn = (n: number) => JSON.stringify([{ role: "user", content: `q${n}` }]);
      const answer = (n: number) => JSON.stringify({ id: `resp_c${n}`, output: [{ role: "assistant", content: `a${n}` }] });
      await s.put(record("a", "resp_c1", { context: turn(1), response: answer(1) }, now), BIG);
      await s.put(record("a", "resp_c2", { context: turn(2), response: answer(2), previousId: "resp_c1" }, now + 1), BIG);
      await s.put(record("a", "resp_c3", { context: turn(3), response: answer(3), previousId: "resp_c2" }, now + 2), BIG);
      const whole = ["q1", "a1", "q2", "a2", "q3", "a3"];
      const read = async () => expandedInput((await s.conversation("a", "resp_c3", Date.now()))!.links, []).map((i) => (i as { content: string }).content);
      expect(await read()).toEqual(whole);
      expect(await s.conversation("b", "resp_c3", Date.now())).toBeUndefined();
      expect(await s.delete("a", "resp_c2")).toBe(true);
      expect(await read()).toEqual(whole);
      expect(await s.delete("a", "resp_c1")).toBe(true);
      expect(await read()).toEqual(whole);
    });
  });
}
