/**
 * The fleet manager's EndpointSink over the real EndpointRegistry (shared
 * table, model catalog, dial guard, circuit breakers): a replica's endpoint
 * is served at once under its configured model, handing it over again changes
 * nothing, a changed URL takes a new slot (draining carried over, the old
 * slot held while a request still uses it), and "ready" is the table's READY
 * flag the gateway's health poll writes.
 */
import { beforeEach, describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import type { ManagedEndpoint } from "../../src/control/endpoint-sink.ts";
import { CircuitBreakers } from "../../src/gateway/circuit-breaker.ts";
import { DialGuard } from "../../src/gateway/dial-guard.ts";
import { type EndpointListeners, EndpointRegistry } from "../../src/gateway/endpoints.ts";
import { ModelCatalog } from "../../src/gateway/model-catalog.ts";
import { RegistryEndpointSink } from "../../src/serve/fleet-endpoint-sink.ts";
import { EndpointTable, I, SLOT_FREE, SLOT_RETIRING } from "../../src/shared/endpoint-table.ts";

const SLOTS = 4;
const replica: ManagedEndpoint = {
  id: "fl-sim-llama-abc123",
  url: "http://127.0.0.1:8101",
  pool: "default",
  models: ["sim-llama"],
  engine: "auto",
  node: "node-a",
  gpuIds: ["GPU-aa00-0000-0000-0000-000000000000"],
};

let table: EndpointTable;
let catalog: ModelCatalog;
let registry: EndpointRegistry;
let sink: RegistryEndpointSink;
let calls: string[];

beforeEach(() => {
  const config = buildConfig({}, {}, "test");
  table = new EndpointTable(SLOTS);
  catalog = new ModelCatalog(config);
  registry = new EndpointRegistry(table, catalog, new DialGuard(SLOTS), new CircuitBreakers(table, { failureThreshold: 3, openMs: 1_000 }));
  calls = [];
  const listeners: EndpointListeners = {
    setEndpoint: (index, d) => void calls.push(`endpoint ${index} ${d ? d.id : "-"}`),
    setModels: (index, models) => void calls.push(`models ${index} ${models.join(",")}`),
    pollEndpoint: (index, e) => void calls.push(`poll ${index} ${e ? e.url : "-"}`),
  };
  registry.attach(listeners);
  sink = new RegistryEndpointSink(registry, (node) => (node === "node-a" ? "http://10.0.0.11:9400/metrics" : undefined));
});

describe("RegistryEndpointSink", () => {
  test("a replica of a model with api_key_env carries the gateway's key to its engine, and to its polls", () => {
    const keyed = new RegistryEndpointSink(registry, () => undefined, undefined, { FLEET_KEY: "sk-fleet" });
    keyed.addEndpoint({ ...replica, apiKeyEnv: "FLEET_KEY" });
    const slot = registry.slotOf(replica.id)!;
    expect(registry.upstreamHeadersOf(slot)).toEqual({ authorization: "Bearer sk-fleet" });
    expect(registry.polled(slot)?.headers).toEqual({ authorization: "Bearer sk-fleet" });
    // The same replica handed over again changes nothing; without the variable, nothing is sent.
    keyed.addEndpoint({ ...replica, apiKeyEnv: "FLEET_KEY" });
    expect(registry.slotOf(replica.id)).toBe(slot);
    new RegistryEndpointSink(registry, () => undefined, undefined, {}).addEndpoint({ ...replica, id: "other", apiKeyEnv: "FLEET_KEY" });
    expect(registry.upstreamHeadersOf(registry.slotOf("other")!)).toEqual({});
  });

  test("a Ready replica is routed at once: configured model, node, GPUs and the node's DCGM exporter", () => {
    expect(catalog.resolve("sim-llama")).toBeUndefined();
    sink.addEndpoint(replica);
    const slot = registry.slotOf(replica.id)!;
    expect(slot).toBe(0);
    expect(registry.specOf(slot)).toEqual({ ...replica, models: ["sim-llama"], dcgmUrl: "http://10.0.0.11:9400/metrics" });
    expect(catalog.resolve("sim-llama")).toBe("sim-llama");
    expect(registry.polled(slot)).toMatchObject({ models: ["sim-llama"], gpuIds: replica.gpuIds, dcgmUrl: "http://10.0.0.11:9400/metrics" });
    expect(calls).toEqual([`endpoint 0 ${replica.id}`, `poll 0 ${replica.url}`]);
  });

  test("the same replica again changes nothing: same slot, health and in-flight count kept", () => {
    sink.addEndpoint(replica);
    table.setInt(0, I.READY, 1);
    table.addInt(0, I.INFLIGHT, 2);
    calls.length = 0;
    sink.addEndpoint({ ...replica, models: [...replica.models], gpuIds: [...replica.gpuIds] });
    expect(calls).toEqual([]);
    expect(registry.slotOf(replica.id)).toBe(0);
    expect(sink.ready(replica.id)).toBe(true);
    expect(sink.inflight(replica.id)).toBe(2);
  });

  test("a changed URL moves the endpoint to a new slot; draining carries over and the old slot stays held while a request uses it", () => {
    sink.addEndpoint(replica);
    sink.setDraining(replica.id, true);
    table.addInt(0, I.INFLIGHT, 1);
    sink.addEndpoint({ ...replica, url: "http://127.0.0.1:8102" });
    const slot = registry.slotOf(replica.id)!;
    expect(slot).toBe(1);
    expect(registry.urlOf(slot)).toBe("http://127.0.0.1:8102");
    expect(table.getInt(slot, I.DRAINING)).toBe(1);
    // The request still on the old slot can still reach its engine and let go.
    expect(table.getInt(0, I.SLOT)).toBe(SLOT_RETIRING);
    expect(registry.urlOf(0)).toBe(replica.url);
    expect(registry.idOf(0)).toBe(replica.id);
    table.addInt(0, I.INFLIGHT, -1);
    registry.sweep();
    expect(table.getInt(0, I.SLOT)).toBe(SLOT_FREE);
    expect(registry.urlOf(0)).toBeUndefined();
  });

  test("ready is the gateway's own health verdict (READY flag); unknown ids are not ready and hold nothing", () => {
    sink.addEndpoint(replica);
    expect(sink.ready(replica.id)).toBe(false);
    table.setInt(0, I.READY, 1);
    expect(sink.ready(replica.id)).toBe(true);
    expect(sink.ready("fl-unknown")).toBe(false);
    expect(sink.inflight("fl-unknown")).toBe(0);
  });

  test("removal: out of the catalog and both workers at once, the slot freed once nothing holds it", () => {
    sink.addEndpoint(replica);
    table.addInt(0, I.INFLIGHT, 1);
    calls.length = 0;
    sink.removeEndpoint(replica.id);
    expect(calls).toEqual(["endpoint 0 -", "poll 0 -"]);
    expect(catalog.resolve("sim-llama")).toBeUndefined();
    expect(sink.inflight(replica.id)).toBe(0);
    expect(table.getInt(0, I.SLOT)).toBe(SLOT_RETIRING);
    table.addInt(0, I.INFLIGHT, -1);
    sink.addEndpoint({ ...replica, id: "fl-other" });
    // The retired slot is reused last: the newcomer takes a never-used one.
    expect(registry.slotOf("fl-other")).toBe(1);
    sink.removeEndpoint("fl-missing"); // unknown: nothing happens
    expect(registry.active().map((e) => e.id)).toEqual(["fl-other"]);
  });
});

describe("evict (issue 13)", () => {
  test("tells the streams open on that replica's slot to leave, and no other", () => {
    sink.addEndpoint(replica);
    sink.addEndpoint({ ...replica, id: "fl-other", url: "http://127.0.0.1:8102" });
    const told: string[] = [];
    const stream = (name: string) => ({ evict: () => void told.push(name) });
    const [s1, s2, s3] = [stream("s1"), stream("s2"), stream("s3")];
    registry.evictions.enter(registry.slotOf(replica.id)!, s1);
    registry.evictions.enter(registry.slotOf(replica.id)!, s2);
    registry.evictions.enter(registry.slotOf("fl-other")!, s3);
    registry.evictions.leave(registry.slotOf(replica.id)!, s2); // it ended
    expect(sink.evict(replica.id)).toBe(1);
    expect(told).toEqual(["s1"]);
    expect(sink.evict("fl-unknown")).toBe(0);
  });
});
