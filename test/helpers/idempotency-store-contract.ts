/**
 * The IdempotencyStore contract (src/jobs/idempotency-store.ts) as one suite,
 * run against the embedded bun:sqlite backend and Redis: one holder per key,
 * answers kept byte for byte until they expire, locks that lapse, tokens that
 * must match, tenants kept apart.
 */
import { describe, expect, test } from "bun:test";
import type { IdempotencyStore } from "../../src/jobs/idempotency-store.ts";
import type { RecordedResponse } from "../../src/shared/recorded-response.ts";

const ANSWER: RecordedResponse = {
  status: 201,
  headers: [
    ["content-type", "text/event-stream"],
    ["x-request-id", "r1"],
  ],
  body: new Uint8Array([100, 97, 0, 255, 10, 10]),
};

export function idempotencyStoreContract(backend: string, open: () => IdempotencyStore): void {
  describe(`IdempotencyStore contract: ${backend}`, () => {
    test("one holder per key; the recorded answer comes back byte for byte until it expires", async () => {
      const s = open();
      const first = await s.begin("t", "k", "fp1", 1_000, 31_000);
      expect(first.kind).toBe("started");
      const token = first.kind === "started" ? first.token : "";
      expect(await s.begin("t", "k", "fp1", 1_001, 31_001)).toEqual({ kind: "running", fingerprint: "fp1" });
      expect(await s.complete("t", "k", "not-the-token", ANSWER, 60_000)).toBe(false);
      expect(await s.complete("t", "k", token, ANSWER, 60_000)).toBe(true);
      expect(await s.complete("t", "k", token, ANSWER, 60_000)).toBe(false); // done already
      const replay = await s.begin("t", "k", "fp2", 59_999, 89_999);
      expect(replay.kind).toBe("completed");
      if (replay.kind !== "completed") return;
      expect(replay.fingerprint).toBe("fp1");
      expect(replay.response.status).toBe(201);
      expect(replay.response.headers).toEqual(ANSWER.headers);
      expect([...replay.response.body]).toEqual([...ANSWER.body]);
      // Expired: the key is free again.
      expect((await s.begin("t", "k", "fp3", 60_000, 90_000)).kind).toBe("started");
    });

    test("a lapsed lock frees the key for another holder; the old holder can no longer complete", async () => {
      const s = open();
      const a = await s.begin("t", "lapse", "fp", 0, 100);
      const b = await s.begin("t", "lapse", "fp", 100, 200);
      expect(b.kind).toBe("started");
      expect(await s.complete("t", "lapse", a.kind === "started" ? a.token : "", ANSWER, 10_000)).toBe(false);
      expect(await s.complete("t", "lapse", b.kind === "started" ? b.token : "", ANSWER, 10_000)).toBe(true);
    });

    test("abandon frees the key (only for its holder); tenants do not share keys", async () => {
      const s = open();
      const a = await s.begin("t", "ab", "fp", 0, 10_000);
      await s.abandon("t", "ab", "someone-else");
      expect((await s.begin("t", "ab", "fp", 1, 10_000)).kind).toBe("running");
      await s.abandon("t", "ab", a.kind === "started" ? a.token : "");
      expect((await s.begin("t", "ab", "fp", 2, 10_000)).kind).toBe("started");
      expect((await s.begin("other", "ab", "fp", 3, 10_000)).kind).toBe("started");
      // A scope and key that concatenate alike are still different keys.
      expect((await s.begin("t:a", "b", "fp", 4, 10_000)).kind).toBe("started");
      expect((await s.begin("t", "a:b", "fp", 4, 10_000)).kind).toBe("started");
    });
  });
}
