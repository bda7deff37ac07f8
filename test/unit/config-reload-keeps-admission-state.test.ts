/**
 * A reload of a data plane built in process (workers, no listener): the
 * request path's context is replaced whole while the one a request already
 * holds stays as it was; an endpoint that stays keeps its slot (and so its
 * counts and circuits), a removed one held by a request retires instead of
 * freeing; new scorer weights reach the scheduler worker; a profile that
 * would need other wiring, and a file that does not validate, change nothing.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { buildConfig, ConfigError } from "../../src/config/load.ts";
import type { Config } from "../../src/config/types.ts";
import { newKeyId, newSecret } from "../../src/keys/live-key.ts";
import { buildDataPlane, type DataPlane } from "../../src/serve/data-plane.ts";
import { I, SLOT_RETIRING } from "../../src/shared/endpoint-table.ts";

const dir = mkdtempSync(join(tmpdir(), "llmgw-reload-plane-"));
let plane: DataPlane | undefined;
/** What the next reload reads (the file, as the test rewrites it). */
let next: () => Config;
afterAll(async () => {
  await plane?.close();
  rmSync(dir, { recursive: true, force: true });
});

// Closed ports: what is checked is the wiring, not traffic.
const endpoint = (id: string, port: number) => ({ id, url: `http://127.0.0.1:${port}`, models: ["m"] });
const doc = (over: Record<string, unknown> = {}) => ({
  data_dir: dir,
  endpoints: [endpoint("a", 1), endpoint("b", 2)],
  scheduling: {
    scorers: [
      { name: "queue-depth", weight: 2 },
      { name: "inflight", weight: 1 },
    ],
  },
  ...over,
});

test("a reload swaps the context whole, keeps the state of what stays, and refuses what needs other wiring", async () => {
  next = () => buildConfig(doc());
  plane = await buildDataPlane(buildConfig(doc()), { log: pino({ level: "silent" }), defaultMetrics: false, reread: () => next() });
  const reloader = plane.reloader!;
  const held = plane.live.current;
  const slotB = held.endpoints.slotOf("b")!;
  const slotA = held.endpoints.slotOf("a")!;
  // A request holds endpoint a when the reload removes it.
  held.table.setInt(slotA, I.INFLIGHT, 1);

  next = () =>
    buildConfig(
      doc({
        endpoints: [endpoint("b", 2), endpoint("c", 3)],
        scheduling: {
          scorers: [
            { name: "queue-depth", weight: 1 },
            { name: "inflight", weight: 5 },
          ],
        },
        retry: { max_attempts: 7 },
      }),
    );
  const ok = await reloader.reload("admin");
  expect(ok).toEqual({
    result: "ok",
    changed: ["endpoints", "scheduling.scorers", "retry"],
    endpoints: { added: ["c"], removed: ["a"], changed: [] },
  });
  const now = plane.live.current;
  expect(now).not.toBe(held);
  expect(now.config.retry.maxAttempts).toBe(7);
  // The request that started before keeps its settings.
  expect(held.config.retry.maxAttempts).toBe(3);
  // Stateful parts are shared: admission, breakers, registry.
  expect(now.admission).toBe(held.admission);
  expect(now.breakers).toBe(held.breakers);
  expect(now.endpoints.slotOf("b")).toBe(slotB);
  expect(now.table.getInt(slotA, I.SLOT)).toBe(SLOT_RETIRING);
  expect(now.endpoints.idOf(slotA)).toBe("a");
  expect(now.endpoints.active().map((e) => e.id)).toEqual(["b", "c"]);
  expect(plane.workers.admission.posted.scheduling).toBe(1);

  // A profile that would read the engines' KV blocks needs the KV-events worker, started only at start.
  next = () => buildConfig(doc({ endpoints: [endpoint("b", 2), endpoint("c", 3)], scheduling: { scorers: [{ name: "precise-prefix", weight: 1 }] } }));
  const refused = await reloader.reload("signal");
  expect(refused.result).toBe("refused");
  expect(refused.result === "refused" && refused.keys[0]).toContain("scheduling.scorers");
  expect(plane.live.current).toBe(now);
  expect(plane.workers.admission.posted.scheduling).toBe(1);

  // No endpoint and no fleet: serve would not start on it, and a reload does not leave a gateway there.
  next = () => buildConfig(doc({ endpoints: [] }));
  const empty = await reloader.reload("signal");
  expect(empty.result === "refused" && empty.keys).toEqual(["endpoints"]);
  expect(plane.live.current.endpoints.active().map((e) => e.id)).toEqual(["b", "c"]);

  next = () => {
    throw new ConfigError("llmgw.yaml", ["retry.max_attempts: expected a number"]);
  };
  expect(await reloader.reload("signal")).toEqual({
    result: "invalid",
    message: "invalid configuration (llmgw.yaml):\n  retry.max_attempts: expected a number",
    issues: ["retry.max_attempts: expected a number"],
  });
  expect(plane.live.current).toBe(now);
});

test("reloads asked at once run one after another: the second compares against what the first applied", async () => {
  const reloader = plane!.reloader!;
  next = () => buildConfig(doc({ endpoints: [endpoint("b", 2), endpoint("c", 3)], retry: { max_attempts: 2 } }));
  const results = await Promise.all([reloader.reload("signal"), reloader.reload("admin")]);
  expect(results.map((r) => (r.result === "ok" ? r.changed : r.result))).toEqual([["scheduling.scorers", "retry"], []]);
  expect(plane!.live.current.config.retry.maxAttempts).toBe(2);
});

test("a reload that changes auth.keys keeps the live keys: the same authenticator, its YAML keys replaced, a live key still let in", async () => {
  const p = plane!;
  const yamlKey = (key: string, tenant: string) => ({ key, tenant });
  next = () => buildConfig(doc({ endpoints: [endpoint("b", 2), endpoint("c", 3)], auth: { keys: [yamlKey("sk-old-key-0001", "t-old")] } }));
  expect((await p.reloader!.reload("admin")).result).toBe("ok");
  const auth = p.live.current.auth;
  // A live key in the store, read by the next refresh.
  const { secret, stored } = newSecret(Date.now());
  await p.live.current.liveKeys!.store.put({
    id: newKeyId(),
    name: "live",
    tenant: "t-live",
    max_band: null,
    secrets: [stored],
    created_ms: Date.now(),
    revoked_ms: null,
    requests_per_minute: null,
    tokens_per_minute: null,
    models: null,
  });
  await p.live.current.liveKeys!.refresh(true);
  const as = (key: string) => {
    try {
      return p.live.current.auth.authenticate(new Headers({ authorization: `Bearer ${key}` })).tenant;
    } catch {
      return "refused";
    }
  };
  expect([as("sk-old-key-0001"), as(secret)]).toEqual(["t-old", "t-live"]);

  next = () => buildConfig(doc({ endpoints: [endpoint("b", 2), endpoint("c", 3)], auth: { keys: [yamlKey("sk-new-key-0002", "t-new")] } }));
  expect((await p.reloader!.reload("signal")).result).toBe("ok");
  expect(p.live.current.auth).toBe(auth);
  expect([as("sk-old-key-0001"), as("sk-new-key-0002"), as(secret)]).toEqual(["refused", "t-new", "t-live"]);
});
