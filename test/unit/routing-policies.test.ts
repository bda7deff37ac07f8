import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  derivedPolicies,
  endpointExtras,
  readPolicyFile,
  readPolicyFiles,
  routingPolicies,
  selectPolicies,
  templateListeners,
} from "../../src/bench/routing/policies.ts";
import { SCORER_NAMES } from "../../src/config/plugin-names.ts";
import { schedulingSchema } from "../../src/config/schema.ts";
import { UsageError } from "../../src/shared/flags.ts";

const dirs: string[] = [];
function dirWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-policies-"));
  dirs.push(dir);
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const DEFAULTS = schedulingSchema.parse({});

describe("the shipped policies", () => {
  const all = routingPolicies();
  const byName = (n: string) => all.find((p) => p.name === n)!;

  test("random, round-robin, load, the estimate and llmgw's default, in that order, then one per scorer no file uses", () => {
    expect(all.slice(0, 5).map((p) => p.name)).toEqual(["random", "round-robin", "load", "prefix-affinity", "default"]);
    expect(byName("random").gateway).toEqual({ scheduling: { scorers: [], picker: "random" } });
    expect(byName("round-robin").gateway).toEqual({ scheduling: { scorers: [], picker: "round-robin" } });
    expect(byName("default").gateway).toEqual({});
    expect(byName("default").published).toBe("precise");
    expect(byName("default").endpoint).toEqual({ kv_events: { endpoint: "{engine.kv-events}", replay_endpoint: "{engine.kv-replay}", topic: "kv" } });
    expect(byName("prefix-affinity").published).toBe("estimated");
    expect(schedulingSchema.parse(byName("prefix-affinity").gateway.scheduling).scorers).toEqual(
      DEFAULTS.scorers.map((s) => (s.name === "precise-prefix" ? { ...s, name: "prefix-affinity" } : s)),
    );
    expect(byName("prefix-rendezvous").source).toBe("derived: scorer prefix-rendezvous");
  });

  test("load is llmgw's default profile without its prefix scorer, at the same weights", () => {
    const load = schedulingSchema.parse(byName("load").gateway.scheduling);
    expect(load.scorers).toEqual(DEFAULTS.scorers.filter((s) => s.name !== "precise-prefix"));
    expect(load.picker).toBe(DEFAULTS.picker);
  });

  test("every registered scorer and picker is measured by some policy", () => {
    const scorers = new Set(all.flatMap((p) => schedulingSchema.parse(p.gateway.scheduling ?? {}).scorers.map((s) => s.name)));
    for (const s of SCORER_NAMES) expect(scorers.has(s)).toBe(true);
  });
});

describe("derived policies", () => {
  test("a scorer no file uses replaces the default's prefix scorer (precise-prefix) at its weight; a scorer a file uses is not derived", () => {
    const files = readPolicyFiles(dirWith({ "x.yaml": "description: x\ngateway:\n  scheduling:\n    scorers: [{ name: prefix-rendezvous, weight: 1 }]\n" }));
    const derived = derivedPolicies(files);
    expect(derived.map((p) => p.name)).toEqual([
      "queue-depth",
      "kv-cache",
      "inflight",
      "prefix-affinity",
      "precise-prefix",
      "lora-affinity",
      "token-load",
      "random",
      "round-robin",
    ]);
    // A scorer of the default's own is not listed twice.
    expect(derived.find((p) => p.name === "inflight")!.gateway).toEqual({
      scheduling: {
        scorers: [
          { name: "queue-depth", weight: 2 },
          { name: "kv-cache", weight: 1 },
          { name: "lora-affinity", weight: 6 },
          { name: "inflight", weight: 3 },
        ],
      },
    });
    const rendezvous = derivedPolicies([]).find((p) => p.name === "prefix-rendezvous")!;
    const weight = DEFAULTS.scorers.find((s) => s.name === "precise-prefix")!.weight;
    expect(rendezvous.gateway).toEqual({
      scheduling: { scorers: [...DEFAULTS.scorers.filter((s) => s.name !== "precise-prefix"), { name: "prefix-rendezvous", weight }] },
    });
    expect(derived.some((p) => p.name === "prefix-rendezvous")).toBe(false);
  });

  test("a picker no file uses gets the default's scorers with that picker", () => {
    const files = readPolicyFiles(dirWith({ "a.yaml": "description: a\n" }));
    const rr = derivedPolicies(files).find((p) => p.name === "round-robin")!;
    expect(rr.gateway).toEqual({ scheduling: { picker: "round-robin" } });
    expect(rr.source).toBe("derived: picker round-robin");
  });

  test("a file named like a derived policy replaces it", () => {
    const all = routingPolicies(dirWith({ "prefix-rendezvous.yaml": "description: mine\norder: 5\n" }));
    const p = all.filter((x) => x.name === "prefix-rendezvous");
    expect(p).toHaveLength(1);
    expect(p[0]!.description).toBe("mine");
    expect(all[0]!.name).toBe("prefix-rendezvous");
  });
});

describe("policy files are checked before anything starts", () => {
  const refused = (text: string, name = "p.yaml") => {
    try {
      readPolicyFile(join(dirWith({ [name]: text }), name));
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      return (err as Error).message;
    }
    throw new Error("accepted");
  };

  test("a key the gateway would refuse names the file and the key path", () => {
    expect(refused("description: d\ngateway:\n  scheduling:\n    picker: fastest\n")).toMatch(/p\.yaml: the gateway would refuse it: scheduling\.picker/);
    expect(refused("description: d\ngateway:\n  scheduling:\n    scorers: [{ name: clairvoyance, weight: 1 }]\n")).toMatch(/scheduling\.scorers\[0\]\.name/);
    expect(refused("description: d\ngateway:\n  no_such_key: 1\n")).toMatch(/no_such_key/);
  });

  test("the listeners and endpoints are the bench's; the file's own keys are checked too", () => {
    expect(refused("description: d\ngateway:\n  endpoints: []\n")).toMatch(/gateway\.endpoints is the bench's to set/);
    expect(refused("gateway: {}\n")).toMatch(/description/);
    expect(refused("description: d\npublished: psychic\n")).toMatch(/published/);
    expect(refused("description: d\nspeed: 3\n")).toMatch(/speed/);
    expect(refused("description: [unclosed\n")).toMatch(/p\.yaml/);
    expect(refused("description: d\n", "Bad_Name.yaml")).toMatch(/file name is its name/);
  });

  test("--policies picks and orders; an unknown name lists the known ones", () => {
    const all = routingPolicies();
    expect(selectPolicies(all, ["default", "random"]).map((p) => p.name)).toEqual(["default", "random"]);
    expect(selectPolicies(all, []).length).toBe(all.length);
    expect(() => selectPolicies(all, ["nope"])).toThrow(/unknown policy 'nope' \(known: random, round-robin, load, prefix-affinity, default/);
  });
});

describe("endpoint templates", () => {
  test("{engine.NAME} becomes the engine's listener URL of that name, anywhere in the entry", () => {
    const t = { kv_events: { endpoint: "{engine.kv-events}", replay: ["{engine.kv-replay}"] }, weight: 2 };
    expect(templateListeners(t).sort()).toEqual(["kv-events", "kv-replay"]);
    expect(endpointExtras(t, { api: "http://a", "kv-events": "tcp://127.0.0.1:5557", "kv-replay": "tcp://127.0.0.1:5558" })).toEqual({
      kv_events: { endpoint: "tcp://127.0.0.1:5557", replay: ["tcp://127.0.0.1:5558"] },
      weight: 2,
    });
    expect(() => endpointExtras(t, { api: "http://a" })).toThrow(/\{engine\.kv-events\}, which the engine did not announce \(it has: api\)/);
    expect(templateListeners({})).toEqual([]);
  });
});
