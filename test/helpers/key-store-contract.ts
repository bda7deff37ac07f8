/**
 * The KeyStore contract (src/keys/key-store.ts) as one suite, run against the
 * embedded bun:sqlite backend and Redis: records kept whole, the version
 * moving on every write (what gateways poll), usage summed from several
 * gateways with the later last use, and an unreadable record skipped.
 */
import { describe, expect, test } from "bun:test";
import type { KeyStore } from "../../src/keys/key-store.ts";
import type { LiveKeyRecord } from "../../src/keys/live-key.ts";

export function record(id: string, over: Partial<LiveKeyRecord> = {}): LiveKeyRecord {
  return {
    id,
    name: `name of ${id}`,
    tenant: "t",
    max_band: null,
    secrets: [{ sha256: "a".repeat(64), prefix: "llmgw-abcdef", created_ms: 1, expires_ms: null }],
    created_ms: 1,
    revoked_ms: null,
    requests_per_minute: null,
    tokens_per_minute: 1000,
    models: ["m"],
    ...over,
  };
}

/** `corrupt(store, id)` writes something under `id` that is not a record (as another version or a hand edit might). */
export function keyStoreContract(backend: string, open: () => KeyStore, corrupt: (s: KeyStore, id: string) => Promise<void>): void {
  describe(`KeyStore contract: ${backend}`, () => {
    test("records come back whole; every write moves the version", async () => {
      const s = open();
      const v0 = await s.version();
      expect(await s.list()).toEqual([]);
      expect(await s.get("key_0000000000000001")).toBeUndefined();
      const a = record("key_0000000000000001");
      await s.put(a);
      const v1 = await s.version();
      expect(v1).not.toBe(v0);
      expect(await s.get(a.id)).toEqual(a);
      const revoked = { ...a, revoked_ms: 5, models: null };
      await s.put(revoked);
      expect(await s.version()).not.toBe(v1);
      await s.put(record("key_0000000000000002", { name: "naïve ‮ name\u0000" }));
      const listed = await s.list();
      expect(listed.map((r) => r.id)).toEqual(["key_0000000000000001", "key_0000000000000002"]);
      expect(listed[0]).toEqual(revoked);
      expect(listed[1]!.name).toBe("naïve ‮ name\u0000");
    });

    test("usage from several gateways adds up; the last use is the latest; unknown keys have none", async () => {
      const s = open();
      await s.addUsage(new Map([["key_00000000000000aa", { requests: 2, tokensIn: 10, tokensOut: 5, lastUsedMs: 2_000 }]]));
      await s.addUsage(
        new Map([
          ["key_00000000000000aa", { requests: 1, tokensIn: 3, tokensOut: 0, lastUsedMs: 1_000 }],
          ["key_00000000000000bb", { requests: 1, tokensIn: 1, tokensOut: 1, lastUsedMs: 7 }],
        ]),
      );
      await s.addUsage(new Map());
      const u = await s.usage(["key_00000000000000aa", "key_00000000000000bb", "key_00000000000000cc"]);
      expect(u.get("key_00000000000000aa")).toEqual({ requests: 3, tokens_in: 13, tokens_out: 5, last_used_ms: 2_000 });
      expect(u.get("key_00000000000000bb")).toEqual({ requests: 1, tokens_in: 1, tokens_out: 1, last_used_ms: 7 });
      expect(u.get("key_00000000000000cc")).toEqual({ requests: 0, tokens_in: 0, tokens_out: 0, last_used_ms: null });
    });

    test("an unreadable record is skipped, the others still listed", async () => {
      const s = open();
      await s.put(record("key_0000000000000003"));
      await corrupt(s, "key_0000000000000004");
      expect((await s.list()).map((r) => r.id)).toEqual(["key_0000000000000003"]);
      expect(await s.get("key_0000000000000004")).toBeUndefined();
    });
  });
}
