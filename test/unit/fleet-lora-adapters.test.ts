/**
 * The fleet's LoRA adapters: the config (adapters on a base model, their
 * checks), the launch (vLLM's LoRA flags and the runtime-update variable on
 * vllm and sim replicas, refused on sglang), and the pure plan of where
 * adapters are loaded and unloaded.
 */
import { describe, expect, test } from "bun:test";
import { buildLaunchPlan } from "../../src/agent/engine-adapters.ts";
import { replicaSpecSchema } from "../../src/agent/replica-spec.ts";
import { validateReplica } from "../../src/agent/validation.ts";
import { fleetModelSchema, fleetModelWire, toFleetModel } from "../../src/config/fleet-schema.ts";
import { buildConfig, ConfigError } from "../../src/config/load.ts";
import { type AdapterPlanInput, type AdapterReplicaView, planAdapters, rendezvousHash } from "../../src/control/adapter-plan.ts";

const bins = { vllm: "vllm", python: "python3", bun: "/opt/bun", cli: "/repo/src/cli.ts" };

function issues(raw: Record<string, unknown>): string[] {
  try {
    buildConfig(raw, {});
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.issues];
    throw err;
  }
}

const model = (over: Record<string, unknown> = {}) =>
  toFleetModel(
    fleetModelSchema.parse({
      name: "llama",
      engine: "vllm",
      replicas: 2,
      adapters: [
        { name: "sql", path: "/a/sql" },
        { name: "chat", path: "/a/chat" },
      ],
      ...over,
    }),
  );

describe("fleet.models[].adapters", () => {
  test("a model with adapters gets LoRA settings (max_loras 4 unless set) and round-trips through its wire form", () => {
    const m = model();
    expect(m.adapters).toEqual([
      { name: "sql", path: "/a/sql" },
      { name: "chat", path: "/a/chat" },
    ]);
    expect(m.lora).toEqual({ maxLoras: 4 });
    expect(model({ max_loras: 8, max_lora_rank: 64, max_cpu_loras: 16 }).lora).toEqual({ maxLoras: 8, maxLoraRank: 64, maxCpuLoras: 16 });
    expect(toFleetModel(fleetModelSchema.parse(fleetModelWire(model({ max_loras: 8 }))))).toEqual(model({ max_loras: 8 }));
    expect(toFleetModel(fleetModelSchema.parse({ name: "m", engine: "sim", replicas: 1 })).lora).toBeUndefined();
  });

  test("bad adapter settings name their key", () => {
    const one = (m: Record<string, unknown>) => issues({ fleet: { models: [{ name: "llama", engine: "vllm", replicas: 1, ...m }] } });
    expect(one({ engine: "sglang", adapters: [{ name: "a", path: "/a" }] })).toEqual([
      "fleet.models[0].adapters: LoRA adapters are loaded at run time on vllm and sim replicas only",
    ]);
    expect(one({ max_loras: 4 })).toEqual(["fleet.models[0].max_loras: applies with adapters only"]);
    expect(one({ adapters: [{ name: "a", path: "/a" }], max_loras: 8, max_cpu_loras: 4 })).toEqual([
      "fleet.models[0].max_cpu_loras: expected at least max_loras (8)",
    ]);
    expect(
      one({
        adapters: [
          { name: "a", path: "/a" },
          { name: "a", path: "/b" },
        ],
      }),
    ).toEqual(["fleet.models[0].adapters[1].name: 'a' is already the model's or another adapter's name"]);
    expect(one({ adapters: [{ name: "llama", path: "/a" }] })).toEqual([
      "fleet.models[0].adapters[0].name: 'llama' is already the model's or another adapter's name",
    ]);
    expect(one({ adapters: [{ name: "a", path: "/a" }], max_lora_rank: 12 })[0]).toStartWith("fleet.models[0].max_lora_rank:");
    expect(
      issues({
        fleet: {
          models: [
            { name: "llama", engine: "vllm", replicas: 1, adapters: [{ name: "qwen", path: "/a" }] },
            { name: "qwen", engine: "vllm", replicas: 1, adapters: [{ name: "x", path: "/a" }] },
          ],
        },
      }),
    ).toEqual(["fleet.models[0].adapters[0].name: 'qwen' is also a model of the fleet"]);
  });
});

describe("launching a replica with LoRA", () => {
  test("vllm and sim get vLLM's LoRA flags and VLLM_ALLOW_RUNTIME_LORA_UPDATING; sglang is refused", () => {
    for (const engine of ["vllm", "sim"] as const) {
      const spec = replicaSpecSchema.parse({ engine, model: "llama", gpus: [0], lora: { maxLoras: 4, maxLoraRank: 32 } });
      const plan = buildLaunchPlan({ spec, port: 8001, host: "127.0.0.1", fabric: null, bins });
      expect(plan.argv.join(" ")).toContain("--enable-lora --max-loras 4 --max-lora-rank 32");
      expect(plan.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING).toBe("True");
    }
    const plain = buildLaunchPlan({
      spec: replicaSpecSchema.parse({ engine: "vllm", model: "llama", gpus: [0] }),
      port: 8001,
      host: "127.0.0.1",
      fabric: null,
      bins,
    });
    expect(plain.argv).not.toContain("--enable-lora");
    expect(plain.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING).toBeUndefined();
    const ctx = { gpus: [], fabric: { adapters: [], island: "single-node" as const }, others: [] };
    expect(() => validateReplica(replicaSpecSchema.parse({ engine: "sglang", model: "m", lora: { maxLoras: 2 } }), ctx)).toThrow("vllm and sim replicas");
    expect(() => validateReplica(replicaSpecSchema.parse({ engine: "vllm", model: "m", lora: { maxLoras: 2 }, extraArgs: ["--max-loras", "8"] }), ctx)).toThrow(
      "sets --max-loras",
    );
  });
});

function replica(id: string, over: Partial<AdapterReplicaView> = {}): AdapterReplicaView {
  return { id, model: "llama", serving: true, listed: [], running: [], waiting: [], slotsFull: false, ...over };
}

function input(replicas: AdapterReplicaView[], over: Partial<AdapterPlanInput> = {}): AdapterPlanInput {
  return {
    now: 100_000,
    idleUnloadMs: 30_000,
    models: [model()],
    replicas,
    lastRequestAt: () => undefined,
    waitingForLoad: () => 0,
    lastUsed: () => 99_000,
    inFlight: () => false,
    ...over,
  };
}

describe("where adapters go", () => {
  test("requests waiting for an adapter loaded nowhere load it on the replica holding fewest, ties to its home", () => {
    const waiting = (a: string) => (a === "sql" ? 2 : 0);
    const plan = planAdapters(input([replica("r1", { listed: ["chat"] }), replica("r2")], { waitingForLoad: waiting }));
    expect(plan).toEqual([{ kind: "load-adapter", model: "llama", replica: "r2", adapter: "sql", path: "/a/sql", why: "demand" }]);
    const tie = planAdapters(input([replica("r1"), replica("r2"), replica("r3")], { waitingForLoad: waiting }));
    const home = ["r1", "r2", "r3"].reduce((b, r) => (rendezvousHash("sql", r) > rendezvousHash("sql", b) ? r : b));
    expect(tie.map((a) => a.replica)).toEqual([home]);
    // Nothing serving, or a call already on its way: nothing to do.
    expect(planAdapters(input([replica("r1", { serving: false })], { waitingForLoad: waiting }))).toEqual([]);
    expect(planAdapters(input([replica("r1")], { waitingForLoad: waiting, inFlight: (r, a) => r === "r1" && a === "sql" }))).toEqual([]);
    // A past request alone (no one waiting) loads nothing: an idle unload is not undone.
    expect(planAdapters(input([replica("r1")], { lastRequestAt: () => 99_500 }))).toEqual([]);
  });

  test("an adapter queued behind full slots everywhere it is loaded goes to one more replica; a merely queued one does not", () => {
    const recent = { lastRequestAt: (a: string) => (a === "sql" ? 99_000 : undefined) };
    const full = planAdapters(input([replica("r1", { listed: ["sql", "chat"], running: ["chat"], waiting: ["sql"], slotsFull: true }), replica("r2")], recent));
    expect(full).toEqual([{ kind: "load-adapter", model: "llama", replica: "r2", adapter: "sql", path: "/a/sql", why: "queued-everywhere" }]);
    expect(planAdapters(input([replica("r1", { listed: ["sql"], waiting: ["sql"], slotsFull: false }), replica("r2")], recent))).toEqual([]);
    expect(planAdapters(input([replica("r1", { listed: ["sql"], running: ["sql"], waiting: ["sql"], slotsFull: true }), replica("r2")], recent))).toEqual([]);
  });

  test("idle adapters are unloaded where they idle; running or queued ones stay; undeclared ones go", () => {
    const lastUsed = (r: string, a: string) => (r === "r1" && a === "sql" ? 60_000 : 99_000);
    const plan = planAdapters(input([replica("r1", { listed: ["sql", "chat", "old"] }), replica("r2", { listed: ["sql"] })], { lastUsed }));
    expect(plan).toEqual([
      { kind: "unload-adapter", model: "llama", replica: "r1", adapter: "sql", why: "idle" },
      { kind: "unload-adapter", model: "llama", replica: "r1", adapter: "old", why: "not-declared" },
    ]);
    expect(planAdapters(input([replica("r1", { listed: ["sql"], waiting: ["sql"] })], { lastUsed }))).toEqual([]);
  });
});
