/** planReload: which changed keys a running gateway applies live, which need a restart (named), and what happens to each endpoint. */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { planReload } from "../../src/config/reload-plan.ts";

const base = {
  listen: "127.0.0.1:8080",
  endpoints: [
    { id: "a", url: "http://10.0.0.1:8000", models: ["m"] },
    { id: "b", url: "http://10.0.0.2:8000", models: ["m"] },
  ],
  models: [{ name: "m", aliases: ["old"] }],
};

const plan = (next: Record<string, unknown>, running: Record<string, unknown> = base) => planReload(buildConfig(running), buildConfig(next));

describe("planReload", () => {
  test("the same document changes nothing", () => {
    expect(plan(base)).toEqual({ live: [], refused: [], endpoints: { added: [], removed: [], changed: [] } });
  });

  test("endpoints added, removed and changed are told apart by id", () => {
    const p = plan({
      ...base,
      endpoints: [
        { id: "b", url: "http://10.0.0.2:8000", models: ["m"], pool: "other" },
        { id: "c", url: "http://10.0.0.3:8000", models: ["m"] },
      ],
    });
    expect(p.live).toEqual(["endpoints"]);
    expect(p.refused).toEqual([]);
    expect(p.endpoints.added.map((e) => e.id)).toEqual(["c"]);
    expect(p.endpoints.removed).toEqual(["a"]);
    expect(p.endpoints.changed.map((e) => e.id)).toEqual(["b"]);
  });

  test("models, deadlines, keys, tenants, retry, continuation and the profile's scorers are live", () => {
    const p = plan({
      ...base,
      models: [{ name: "m", aliases: ["old", "new"], fallback: [] }],
      deadlines: { total_ms: 90_000 },
      auth: { keys: [{ key_sha256: "a".repeat(64), tenant: "t" }] },
      tenants: [{ name: "t", requests_per_minute: 5 }],
      retry: { max_attempts: 5 },
      continuation: { enabled: false },
      scheduling: { scorers: [{ name: "queue-depth", weight: 1 }] },
    });
    expect(p.refused).toEqual([]);
    expect([...p.live].sort()).toEqual(["auth", "continuation", "deadlines", "models", "retry", "scheduling.scorers", "tenants"]);
  });

  test("listeners, state backend, data_dir and sizes are refused by their own key", () => {
    const p = plan({
      ...base,
      listen: "127.0.0.1:9999",
      admin_listen: "127.0.0.1:9998",
      data_dir: "/var/lib/elsewhere",
      max_endpoints: 512,
      scheduling: { prefix_affinity: { lru_entries: 1000 } },
      models: [{ name: "m", aliases: ["old", "new"] }],
    });
    expect([...p.refused].sort()).toEqual(["admin_listen", "data_dir", "listen", "max_endpoints", "scheduling.prefix_affinity.lru_entries"]);
    // What would have been live is still listed: the caller refuses the whole reload when anything is refused.
    expect(p.live).toEqual(["models"]);
  });

  test("a key that appears or goes as a whole is refused by its name", () => {
    const p = plan({ ...base, metrics_listen: "127.0.0.1:9100" });
    expect(p.refused).toEqual(["metrics_listen"]);
    const back = plan(base, { ...base, metrics_listen: "127.0.0.1:9100" });
    expect(back.refused).toEqual(["metrics_listen"]);
  });
});
