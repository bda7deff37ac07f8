/** The ResponseCacheStore contract (src/cache/response-cache-store.ts) as one suite, run against the in-process store and Redis. */
import { describe, expect, test } from "bun:test";
import type { ResponseCacheStore } from "../../src/cache/response-cache-store.ts";

export function responseCacheStoreContract(backend: string, open: () => ResponseCacheStore): void {
  describe(`ResponseCacheStore contract: ${backend}`, () => {
    test("an entry comes back byte for byte until it expires; a new value replaces the old", async () => {
      const s = open();
      expect(await s.get("k", 0)).toBeUndefined();
      await s.set("k", { status: 200, headers: [["content-type", "application/json"]], body: new Uint8Array([123, 0, 255, 125]) }, 1_000);
      const got = await s.get("k", 999);
      expect(got?.status).toBe(200);
      expect(got?.headers).toEqual([["content-type", "application/json"]]);
      expect([...(got?.body ?? [])]).toEqual([123, 0, 255, 125]);
      expect(await s.get("k", 1_000)).toBeUndefined();
      await s.set("k2", { status: 200, headers: [], body: new Uint8Array([1]) }, 5_000);
      await s.set("k2", { status: 200, headers: [], body: new Uint8Array([2]) }, 5_000);
      expect([...((await s.get("k2", 0))?.body ?? [])]).toEqual([2]);
      expect(await s.get("k3", 0)).toBeUndefined();
    });
  });
}
