/**
 * Scenario: a desired model, or one of its LoRA adapters, named with NUL,
 * the bidi override U+202E, a zero-width space or a tab is refused by the
 * management API with 422 VALIDATION_FAILED naming the field (such a name
 * was once stored, loaded again and again and could never be unloaded);
 * nothing is stored. Names of any script are accepted. A model stored
 * before names were checked keeps its replicas: only its hostile adapters
 * are dropped when it is read back. The node agent applies the same rule to
 * the adapters it is asked to load or unload.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadAdapter, unloadAdapter } from "../../src/agent/replica-adapters.ts";
import { RECORD_CODECS } from "../../src/control/record-schemas.ts";
import { LlmgwError } from "../../src/shared/errors.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { ADMIN_TOKEN, serveFleetApi, startFleet, type TestFleet } from "../helpers/fleet.ts";

const tmp = mkdtempSync(join(tmpdir(), "fleet-names-"));
let fleet: TestFleet;
let api: { url: string; stop(): Promise<void> };

const HOSTILE = ["nul\u0000lora", "evil\u202earol", "zero\u200bwidth", "tab\tlora", "-flag"];

async function call(
  method: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; json: { error?: { message: string; code: string; param: string | null; type: string } } & Record<string, unknown> }> {
  const res = await fetch(`${api.url}/admin/v1/fleet${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as never };
}

/** The desired model `name` as GET /models shows it, or undefined. */
async function stored(name: string): Promise<{ name: string; adapters?: { name: string }[] } | undefined> {
  const models = (await call("GET", "/models")).json.models as { name: string; adapters?: { name: string }[] }[];
  return models.find((m) => m.name === name);
}

const withAdapters = (name: string, adapters: string[]) => ({
  name,
  engine: "vllm",
  replicas: 0,
  adapters: adapters.map((a) => ({ name: a, path: `/adapters/${a.length}` })),
});

beforeAll(async () => {
  setLogLevel("error");
  fleet = await startFleet({ data_dir: join(tmp, "data"), nodes: [], fleet: { reconcile_interval_ms: 100 } });
  api = serveFleetApi(fleet.manager);
});

afterAll(async () => {
  await api.stop();
  await fleet.stop();
  rmSync(tmp, { recursive: true, force: true });
  setLogLevel("info");
});

describe("the management API", () => {
  test("refuses a hostile adapter name with 422 naming the field, and stores nothing", async () => {
    for (const bad of HOSTILE) {
      const r = await call("PUT", "/models/base", withAdapters("base", ["good-lora", bad]));
      expect(r.status).toBe(422);
      expect(r.json.error).toMatchObject({ code: "VALIDATION_FAILED", type: "invalid_request_error", param: "adapters.1.name" });
      // The message names the offending code point, never writes it.
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the control characters the names carried
      expect(r.json.error!.message).not.toMatch(/[\u0000\u202e\u200b\t]/);
    }
    expect(await stored("base")).toBeUndefined();
  });

  test("refuses a hostile model name, in a create and in a change of adapters", async () => {
    const evil = "evil\u202eledom";
    const r = await call("PUT", `/models/${encodeURIComponent(evil)}`, withAdapters(evil, []));
    expect(r.status).toBe(422);
    expect(r.json.error).toMatchObject({ code: "VALIDATION_FAILED", param: "name" });
    expect(r.json.error!.message).toContain("U+202E");

    expect((await call("PUT", "/models/base", withAdapters("base", ["中文-lora", "café-lora"]))).status).toBe(201);
    const patch = await call("PATCH", "/models/base", { adapters: [{ name: "nul\u0000lora", path: "/a" }] });
    expect(patch.status).toBe(422);
    expect(patch.json.error).toMatchObject({ code: "VALIDATION_FAILED", param: "adapters.0.name" });
    expect((await stored("base"))?.adapters?.map((a) => a.name)).toEqual(["中文-lora", "café-lora"]);
    expect(await stored(evil)).toBeUndefined();
  });
});

describe("the fleet store", () => {
  test("a stored model with a hostile adapter is read back without that adapter, not skipped whole", () => {
    const record = { spec: withAdapters("base", ["good-lora", "nul\u0000lora", "evil\u202earol"]), source: "api", configHash: null, updatedAt: 1 };
    const r = RECORD_CODECS.models.decode(JSON.stringify(record));
    expect("value" in r).toBe(true);
    if ("value" in r) {
      expect(r.value.spec.name).toBe("base");
      expect(r.value.spec.adapters.map((a) => a.name)).toEqual(["good-lora"]);
    }
  });
});

describe("the node agent", () => {
  test("refuses to load or unload an adapter whose name breaks the rule, before it looks for the replica", async () => {
    for (const bad of HOSTILE) {
      for (const call of [() => loadAdapter(undefined, "r1", bad, { path: "/a" }), () => unloadAdapter(undefined, "r1", bad)]) {
        const err = await call().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(LlmgwError);
        expect((err as LlmgwError).code).toBe("VALIDATION_FAILED");
        expect((err as LlmgwError).param).toBe("name");
      }
    }
    // A good name gets as far as the replica (absent here).
    const err = (await loadAdapter(undefined, "r1", "中文-lora", { path: "/a" }).catch((e: unknown) => e)) as LlmgwError;
    expect(err.code).toBe("NOT_FOUND");
  });
});
