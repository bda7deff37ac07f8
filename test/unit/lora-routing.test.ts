/**
 * LoRA routing's parts: vllm:lora_requests_info read as vLLM writes it (the
 * series with the latest timestamp is the state), /v1/models split into
 * models and adapters, the shared LoRA table and what the health worker
 * writes into it, the adapter catalog, the serves-adapter filter and the
 * lora-affinity scorer's order, and the chooser over the shared tables.
 *
 * test/fixtures/vllm-lora-requests-info.txt: the three sample lines are a
 * verbatim `curl -s localhost:8000/metrics | grep -E "^vllm:lora_requests_info"`
 * from a public lab report (vLLM serving Qwen3-8B with `--enable-lora
 * --max-loras 2` after `vllm bench serve --lora-modules adapter_ko
 * adapter_json`); its HELP and TYPE lines are vLLM's own
 * (vllm/v1/metrics/loggers.py).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { EndpointChooser } from "../../src/admission/chooser.ts";
import { EndpointDirectory } from "../../src/admission/endpoint-directory.ts";
import { parseEngineMetrics } from "../../src/engines/engine-metrics.ts";
import { loraInfo } from "../../src/engines/lora-info.ts";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { AdapterCatalog, UNNUMBERED_ADAPTER } from "../../src/gateway/adapter-catalog.ts";
import { writeLora } from "../../src/polling/health-service.ts";
import { type EndpointSnapshot, INITIAL_SNAPSHOT, parseModelList } from "../../src/polling/readiness.ts";
import { servesAdapter } from "../../src/scheduling/filters/serves-adapter.ts";
import { SchedulingProfile } from "../../src/scheduling/profile.ts";
import {
  HOME_BONUS,
  homeHash,
  LORA_RESIDENT_SCORE,
  LORA_ROOM_SCORE,
  LORA_RUNNING_SCORE,
  LORA_WAITING_SCORE,
  loraAffinity,
  loraAffinityScore,
} from "../../src/scheduling/scorers/lora-affinity.ts";
import type { AdapterView } from "../../src/scheduling/types.ts";
import { EndpointTable, F, I } from "../../src/shared/endpoint-table.ts";
import { AdapterNames, LoraTable, MAX_ADAPTERS, RECENT } from "../../src/shared/lora-table.ts";
import { parseSchedulingForTest } from "../helpers/lora.ts";
import { endpoint, schedulingContext } from "../helpers/scheduling.ts";

const FIXTURE = readFileSync(join(import.meta.dir, "..", "fixtures", "vllm-lora-requests-info.txt"), "utf8");

describe("vllm:lora_requests_info", () => {
  test("the current state is the series with the latest timestamp; the rest is history", () => {
    const info = loraInfo(parsePrometheusText(FIXTURE).samples);
    expect(info).toEqual({ maxLoras: 2, running: [], waiting: [], at: 1.7886264577368872e9 });
    // Drop the idle line: the latest is then adapter_json, running and waiting.
    const mid = FIXTURE.split("\n")
      .filter((l) => !l.includes('running_lora_adapters=""'))
      .join("\n");
    expect(loraInfo(parsePrometheusText(mid).samples)).toMatchObject({ maxLoras: 2, running: ["adapter_json"], waiting: ["adapter_json"] });
  });

  test("several adapters are comma-joined; label order does not matter; absent is undefined", () => {
    const text = [
      "# TYPE vllm:lora_requests_info gauge",
      'vllm:lora_requests_info{waiting_lora_adapters="c",running_lora_adapters="a,b",max_lora="4"} 1.79e+09',
      'vllm:lora_requests_info{max_lora="4",running_lora_adapters="a",waiting_lora_adapters=""} 1.78e+09',
    ].join("\n");
    expect(loraInfo(parsePrometheusText(text).samples)).toMatchObject({ maxLoras: 4, running: ["a", "b"], waiting: ["c"] });
    expect(loraInfo(parsePrometheusText("vllm:num_requests_running 1\n").samples)).toBeUndefined();
    // vLLM without --enable-lora exports no such gauge; an old build wrote max_lora="0".
    expect(parseEngineMetrics(FIXTURE + 'vllm:num_requests_running{engine="0",model_name="m"} 3.0\n', "auto").lora).toMatchObject({ maxLoras: 2 });
    const shared = readFileSync(join(import.meta.dir, "..", "fixtures", "shared", "vllm-metrics__opt-125m__datadog-fixture.txt"), "utf8");
    expect(parseEngineMetrics(shared, "auto").lora).toBeUndefined();
  });
});

describe("/v1/models: models and adapters apart", () => {
  test("an entry with a parent is an adapter of it (vLLM's LoRA cards)", () => {
    const body = JSON.stringify({
      object: "list",
      data: [
        { id: "llama", object: "model", root: "meta-llama/Llama-3.1-8B", parent: null, max_model_len: 8192 },
        { id: "sql", object: "model", root: "/adapters/sql", parent: "llama", max_model_len: null },
        { id: "odd", parent: "odd" },
        { id: 5, parent: "llama" },
      ],
    });
    expect(parseModelList(body)).toEqual({ ids: ["llama", "odd"], adapters: [{ name: "sql", parent: "llama" }], refused: 0 });
    expect(parseModelList("nope")).toBeUndefined();
  });
});

function snapshot(over: Partial<EndpointSnapshot>): EndpointSnapshot {
  return { ...INITIAL_SNAPSHOT, healthy: true, ready: true, loadedModels: ["llama"], metricsAt: 1, metricsStale: false, ...over };
}

describe("the shared LoRA table", () => {
  test("the health worker writes registered, running and waiting adapters and the slots; no LoRA metric clears them", () => {
    const lora = new LoraTable(4);
    const names = new AdapterNames();
    const fresh: [string, number][] = [];
    const metrics = parseEngineMetrics('vllm:lora_requests_info{max_lora="2",running_lora_adapters="sql",waiting_lora_adapters="chat,sql"} 1.79e+09\n', "vllm");
    writeLora(
      lora,
      names,
      1,
      snapshot({
        adapters: [
          { name: "sql", parent: "llama" },
          { name: "chat", parent: "llama" },
          { name: "legal", parent: "llama" },
        ],
        metrics,
      }),
      fresh,
    );
    expect(fresh).toEqual([
      ["sql", 0],
      ["chat", 1],
      ["legal", 2],
    ]);
    expect([0, 1, 2].map((id) => lora.has(1, "registered", id))).toEqual([true, true, true]);
    expect([0, 1, 2].map((id) => lora.has(1, "running", id))).toEqual([true, false, false]);
    expect([0, 1, 2].map((id) => lora.has(1, "waiting", id))).toEqual([true, true, false]);
    expect(lora.maxLoras(1)).toBe(2);
    expect(lora.active(1)).toBe(2);
    expect(lora.count(1, "waiting")).toBe(2);
    // A running adapter holds a slot: it heads the row's recency list.
    expect(lora.recency(1, 0)).toBe(0);
    expect(lora.recency(1, 1)).toBe(-1);
    expect(lora.has(0, "registered", 0)).toBe(false);
    // A later poll whose metrics have no LoRA gauge: running, waiting and slots are gone, registered stays.
    writeLora(
      lora,
      names,
      1,
      snapshot({ adapters: [{ name: "sql", parent: "llama" }], metrics: parseEngineMetrics("vllm:num_requests_running 0\n", "vllm") }),
      [],
    );
    expect(lora.has(1, "running", 0)).toBe(false);
    expect(lora.maxLoras(1)).toBeUndefined();
    expect(lora.has(1, "registered", 0)).toBe(true);
    expect(lora.has(1, "registered", 1)).toBe(false);
    // A view over the same buffer (another thread) sees the same bits.
    const other = new LoraTable(4, lora.buffer);
    other.touch(3, 9);
    expect(lora.recency(3, 9)).toBe(0);
    lora.resetRow(3);
    expect(lora.recency(3, 9)).toBe(-1);
  });

  test("the recency list is an LRU of adapter ids, newest first, bounded", () => {
    const lora = new LoraTable(1);
    for (const id of [1, 2, 3, 2, 4]) lora.touch(0, id);
    expect([4, 2, 3, 1].map((id) => lora.recency(0, id))).toEqual([0, 1, 2, 3]);
    for (let id = 100; id < 100 + RECENT; id++) lora.touch(0, id);
    expect(lora.recency(0, 1)).toBe(-1);
    expect(lora.recency(0, 100 + RECENT - 1)).toBe(0);
    expect(lora.recency(0, 100)).toBe(RECENT - 1);
  });

  test("names past the table's size get no id and are not tracked", () => {
    const names = new AdapterNames();
    for (let i = 0; i < MAX_ADAPTERS; i++) expect(names.idOf(`a${i}`)).toBe(i);
    expect(names.idOf("one-too-many")).toBeUndefined();
    expect(names.idOf("a7")).toBe(7);
  });
});

describe("the adapter catalog", () => {
  test("an adapter routes among its base's endpoints with its id; the fleet's declarations count too", () => {
    const c = new AdapterCatalog();
    expect(c.setEndpoint(0, [{ name: "sql", parent: "llama" }])).toBe(true);
    expect(c.setEndpoint(0, [{ name: "sql", parent: "llama" }])).toBe(false);
    expect(c.route("sql")).toEqual({ base: "llama", id: UNNUMBERED_ADAPTER });
    c.setIds([["sql", 4]]);
    expect(c.route("sql")).toEqual({ base: "llama", id: 4 });
    expect(c.route("llama")).toBeUndefined();
    c.setDeclared([{ name: "legal", base: "llama" }]);
    expect(c.isAdapter("legal")).toBe(true);
    expect(c.endpointsListing("sql")).toEqual([0]);
    c.removeEndpoint(0);
    expect(c.isAdapter("sql")).toBe(false);
  });
});

const view = (over: Partial<AdapterView> = {}): AdapterView => ({
  registered: true,
  running: false,
  waiting: false,
  resident: false,
  active: 1,
  runningAdapters: 1,
  maxLoras: 2,
  ...over,
});

describe("lora-affinity and serves-adapter", () => {
  test("running > still in a slot > room > waiting > none; nothing reported scores as none", () => {
    expect(loraAffinityScore(view({ running: true, active: 2, runningAdapters: 2 }))).toBe(LORA_RUNNING_SCORE);
    expect(loraAffinityScore(view({ resident: true, active: 2 }))).toBe(LORA_RESIDENT_SCORE);
    expect(loraAffinityScore(view())).toBe(LORA_ROOM_SCORE);
    expect(loraAffinityScore(view({ waiting: true, active: 2, runningAdapters: 2 }))).toBe(LORA_WAITING_SCORE);
    expect(loraAffinityScore(view({ active: 2, runningAdapters: 2 }))).toBe(0);
    // In the recency list, but every slot runs another adapter: it was swapped out.
    expect(loraAffinityScore(view({ resident: true, active: 2, runningAdapters: 2 }))).toBe(0);
    expect(loraAffinityScore(view({ resident: true, active: undefined, runningAdapters: undefined, maxLoras: undefined }))).toBe(0);
    const tiers = [LORA_RUNNING_SCORE, LORA_RESIDENT_SCORE, LORA_ROOM_SCORE, LORA_WAITING_SCORE, 0];
    for (let i = 1; i < tiers.length; i++) expect(tiers[i - 1]!).toBeGreaterThan(tiers[i]!);
    // The home bonus orders endpoints within a tier, never lifts room above a slot that already holds it.
    expect(LORA_ROOM_SCORE + HOME_BONUS).toBeLessThan(LORA_RESIDENT_SCORE);
    const ctx = schedulingContext();
    const fleet = [endpoint(0, { adapter: view({ running: true }) }), endpoint(1, { adapter: view() })];
    expect(loraAffinity.score({ model: "m", prefixHashes: [] }, fleet, ctx)).toEqual([0, 0]);
  });

  test("an adapter loaded nowhere has one home among the candidates, the same wherever it is computed", () => {
    const ctx = schedulingContext();
    const fleet = [0, 1, 2, 3].map((i) => endpoint(i, { adapter: view() }));
    const homes = new Map<number, number>();
    for (let adapter = 0; adapter < 64; adapter++) {
      const scores = loraAffinity.score({ model: "m", prefixHashes: [], adapter }, fleet, ctx);
      const home = scores.findIndex((s) => s === LORA_ROOM_SCORE + HOME_BONUS);
      expect(scores.filter((s) => s === LORA_ROOM_SCORE)).toHaveLength(3);
      expect(home).toBe([0, 1, 2, 3].reduce((b, i) => (homeHash(adapter, i) > homeHash(adapter, b) ? i : b), 0));
      homes.set(home, (homes.get(home) ?? 0) + 1);
    }
    // Spread over the replicas, not all on one.
    expect(homes.size).toBe(4);
    expect(Math.max(...homes.values())).toBeLessThan(32);
  });

  test("serves-adapter keeps the endpoints listing the adapter, and everything for a base-model request", () => {
    const fleet = [endpoint(0, { adapter: view({ registered: false, running: true }) }), endpoint(1, { adapter: view() }), endpoint(2)];
    expect(servesAdapter.filter({ model: "m", prefixHashes: [], adapter: 3 }, fleet, schedulingContext()).map((e) => e.index)).toEqual([1]);
    expect(servesAdapter.filter({ model: "m", prefixHashes: [] }, fleet, schedulingContext())).toHaveLength(3);
  });
});

describe("the chooser over the shared tables", () => {
  function tables() {
    const table = new EndpointTable(4);
    const lora = new LoraTable(4);
    const now = 1_000_000;
    for (const row of [0, 1, 2]) {
      table.setInt(row, I.READY, 1);
      table.setInt(row, I.WAITING, 0);
      table.setInt(row, I.RUNNING, 0);
      table.setFloat(row, F.KV_USAGE, 0);
      table.setFloat(row, F.METRICS_AT, now);
      lora.setAdapters(row, "registered", [0, 1]);
      lora.setState(row, 1, 0);
    }
    const directory = new EndpointDirectory([0, 1, 2].map((i) => ({ index: i, id: `e${i}`, pool: 0, poolName: "default", models: ["llama"] })));
    const chooser = new EndpointChooser(table, directory, new SchedulingProfile(parseSchedulingForTest()), 2_000, lora);
    return { table, lora, chooser, now };
  }

  test("an adapter's request goes where it runs, and where the gateway sent it while it is likely still in a slot", () => {
    const { lora, chooser, now, table } = tables();
    lora.setAdapters(2, "running", [0]);
    lora.setState(2, 1, 1);
    let seed = 1;
    const random = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let i = 0; i < 5; i++) {
      const c = chooser.choose({ model: "llama", prefixHashes: [], adapter: 0 }, random, now);
      expect(c.ok && c.index).toBe(2);
      table.addInt(2, I.INFLIGHT, -1);
    }
    // Adapter 1 runs nowhere: any endpoint with a free slot; the one chosen is where the next goes.
    const first = chooser.choose({ model: "llama", prefixHashes: [], adapter: 1 }, random, now);
    expect(first.ok).toBe(true);
    const at = first.ok ? first.index : -1;
    expect(at).not.toBe(2); // 2's only slot holds adapter 0
    expect(lora.recency(at, 1)).toBe(0);
    table.addInt(at, I.INFLIGHT, -1);
    for (let i = 0; i < 5; i++) {
      const c = chooser.choose({ model: "llama", prefixHashes: [], adapter: 1 }, random, now);
      expect(c.ok && c.index).toBe(at);
      table.addInt(at, I.INFLIGHT, -1);
    }
    // An adapter no endpoint lists: nothing to choose, and serves-adapter says why.
    const none = chooser.choose({ model: "llama", prefixHashes: [], adapter: 7 }, random, now);
    expect(none.ok).toBe(false);
    expect(none.drops["serves-adapter"]).toBe(3);
    // Stale metrics: the running bit no longer counts.
    const late = chooser.choose({ model: "llama", prefixHashes: [], adapter: 0 }, random, now + 10_000);
    expect(late.ok).toBe(true);
  });
});
