/**
 * LiveKeys and the authenticator's layers (src/keys/live-keys.ts,
 * src/gateway/api-keys.ts): authenticating is a lookup that never touches
 * the store; a store that is away keeps the known keys in force; a refresh
 * that leaves a key's limits alone keeps its buckets; a rotated secret ends
 * with its grace period; usage that could not be written is kept for the
 * next flush; the config's keys can be replaced without touching the live
 * ones; the per-key metric label is capped.
 */
import { Database } from "bun:sqlite";
import { beforeEach, describe, expect, test } from "bun:test";
import { Registry } from "prom-client";
import type { Config } from "../../src/config/types.ts";
import { Authenticator, type Principal } from "../../src/gateway/api-keys.ts";
import { type KeyStore, SqliteKeyStore, type UsageDelta } from "../../src/keys/key-store.ts";
import { LiveKeys } from "../../src/keys/live-keys.ts";
import { registerKeyMetrics } from "../../src/metrics/key-metrics.ts";
import { LlmgwError } from "../../src/shared/errors.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { record } from "../helpers/key-store-contract.ts";

const admission = { bands: [{ name: "interactive" }, { name: "batch" }], defaultBand: 0 } as unknown as Config["admission"];
const sha = (s: string) => new Bun.CryptoHasher("sha256").update(s).digest("hex");
const bearer = (s: string) => new Headers({ authorization: `Bearer ${s}` });

/** A store whose calls can be made to fail, counting them. */
class FlakyStore implements KeyStore {
  readonly inner = new SqliteKeyStore(new Database(":memory:", { strict: true }));
  down = false;
  calls = 0;
  #gate<T>(fn: () => Promise<T>): Promise<T> {
    this.calls++;
    return this.down ? Promise.reject(new LlmgwError("STATE_UNAVAILABLE", "away")) : fn();
  }
  version = () => this.#gate(() => this.inner.version());
  list = () => this.#gate(() => this.inner.list());
  get = (id: string) => this.#gate(() => this.inner.get(id));
  put = (r: Parameters<KeyStore["put"]>[0]) => this.#gate(() => this.inner.put(r));
  addUsage = (d: ReadonlyMap<string, UsageDelta>) => this.#gate(() => this.inner.addUsage(d));
  usage = (ids: readonly string[]) => this.#gate(() => this.inner.usage(ids));
}

let store: FlakyStore;
let auth: Authenticator;
let live: LiveKeys<readonly Principal[]>;
const used: string[] = [];

beforeEach(async () => {
  setLogLevel("silent");
  store = new FlakyStore();
  auth = new Authenticator({ enabled: true, keys: [{ sha256: sha("config-secret-1"), tenant: "ops", maxBand: 0 }] }, admission);
  live = new LiveKeys({ store, ladder: (t, b, g) => auth.liveLadder(t, b, g), metrics: { used: (id) => void used.push(id) } });
  auth.attachLiveKeys(live);
});

describe("live keys", () => {
  test("authenticating never reads the store; with the store away the known keys stay in force", async () => {
    await store.inner.put(record("key_0000000000000001", { secrets: [{ sha256: sha("s1"), prefix: "s1", created_ms: 0, expires_ms: null }] }));
    await live.refresh();
    const before = store.calls;
    for (let i = 0; i < 1000; i++) auth.authenticate(bearer("s1"));
    expect(store.calls).toBe(before);
    store.down = true;
    await live.refresh();
    expect(auth.authenticate(bearer("s1")).key?.id).toBe("key_0000000000000001");
    expect(live.active).toBe(1);
  });

  test("a rotated secret works until its grace period ends, checked at each request (no refresh needed)", async () => {
    const soon = Date.now() + 150;
    await store.inner.put(
      record("key_0000000000000002", {
        secrets: [
          { sha256: sha("old"), prefix: "o", created_ms: 0, expires_ms: soon },
          { sha256: sha("new"), prefix: "n", created_ms: 0, expires_ms: null },
        ],
      }),
    );
    await live.refresh();
    expect(auth.authenticate(bearer("old")).tenant).toBe("t");
    await Bun.sleep(Math.max(0, soon - Date.now()) + 20);
    expect(() => auth.authenticate(bearer("old"))).toThrow(/Incorrect API key/);
    expect(auth.authenticate(bearer("new")).tenant).toBe("t");
  });

  test("a key's limits are its own buckets, named in the 429; a refresh that leaves them alone does not refill them", async () => {
    const r = record("key_0000000000000003", {
      secrets: [{ sha256: sha("limited"), prefix: "l", created_ms: 0, expires_ms: null }],
      requests_per_minute: 2,
      tokens_per_minute: null,
    });
    await store.inner.put(r);
    await live.refresh();
    const quota = auth.authenticate(bearer("limited")).key!.quota!;
    const now = Date.now();
    quota.admit(r.id, 1, now);
    quota.admit(r.id, 1, now);
    expect(() => quota.admit(r.id, 1, now)).toThrow(/Rate limit reached for API key 'key_0000000000000003'/);
    await store.inner.put({ ...r, name: "renamed" });
    await live.refresh();
    const after = auth.authenticate(bearer("limited")).key!.quota!;
    expect(after).toBe(quota);
    expect(() => after.admit(r.id, 1, now)).toThrow(LlmgwError);
    await store.inner.put({ ...r, requests_per_minute: 100 });
    await live.refresh();
    expect(auth.authenticate(bearer("limited")).key!.quota).not.toBe(quota);
  });

  test("usage that could not be written is kept and added at the next flush", async () => {
    await store.inner.put(record("key_0000000000000004", { secrets: [{ sha256: sha("u"), prefix: "u", created_ms: 0, expires_ms: null }] }));
    await live.refresh();
    const key = auth.authenticate(bearer("u")).key!;
    key.used(10, 5, 1_000);
    store.down = true;
    await live.flush();
    key.used(1, 1, 2_000);
    store.down = false;
    await live.flush();
    expect((await store.inner.usage([key.id])).get(key.id)).toEqual({ requests: 2, tokens_in: 11, tokens_out: 6, last_used_ms: 2_000 });
    expect(used.filter((id) => id === key.id).length).toBe(2);
  });

  test("the config's keys are replaced as a whole, the live ones stay; a config key wins over a live key with the same secret", async () => {
    await store.inner.put(
      record("key_0000000000000005", { tenant: "live-t", secrets: [{ sha256: sha("config-secret-1"), prefix: "c", created_ms: 0, expires_ms: null }] }),
    );
    await store.inner.put(
      record("key_0000000000000006", { tenant: "live-u", secrets: [{ sha256: sha("live-only"), prefix: "x", created_ms: 0, expires_ms: null }] }),
    );
    await live.refresh();
    expect(auth.authenticate(bearer("config-secret-1")).tenant).toBe("ops");
    auth.setConfigKeys([{ sha256: sha("config-secret-2"), tenant: "ops2", maxBand: 1 }]);
    expect(auth.configKeys().map((k) => k.tenant)).toEqual(["ops2"]);
    expect(auth.authenticate(bearer("config-secret-2"))).toMatchObject({ tenant: "ops2", bandName: "batch" });
    // The old config secret now only matches the live key that shares it.
    expect(auth.authenticate(bearer("config-secret-1")).tenant).toBe("live-t");
    expect(auth.authenticate(bearer("live-only")).tenant).toBe("live-u");
  });

  test("revoked keys and keys whose every secret expired do not authenticate", async () => {
    await store.inner.put(record("key_0000000000000007", { revoked_ms: 1, secrets: [{ sha256: sha("rv"), prefix: "r", created_ms: 0, expires_ms: null }] }));
    await store.inner.put(record("key_0000000000000008", { secrets: [{ sha256: sha("ex"), prefix: "e", created_ms: 0, expires_ms: 1 }] }));
    await live.refresh();
    expect(() => auth.authenticate(bearer("rv"))).toThrow(/Incorrect API key/);
    expect(() => auth.authenticate(bearer("ex"))).toThrow(/Incorrect API key/);
    expect(live.active).toBe(0);
  });
});

test("the key label is capped: past the cap, keys share 'other'", async () => {
  const registry = new Registry();
  const m = registerKeyMetrics(registry, () => 0, 3);
  for (let i = 0; i < 10; i++) m.used(`key_${i}`, 1, 2);
  const text = await registry.metrics();
  const labels = new Set([...text.matchAll(/llmgw_key_requests_total\{key="([^"]+)"\}/g)].map((x) => x[1]));
  expect([...labels].sort()).toEqual(["key_0", "key_1", "key_2", "other"]);
  expect(text).toContain('llmgw_key_requests_total{key="other"} 7');
  expect(text).toContain('llmgw_key_tokens_total{key="other",direction="out"} 14');
});
