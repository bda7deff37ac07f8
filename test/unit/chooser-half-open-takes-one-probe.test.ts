/**
 * A half-open circuit admits one request at a time (its probe) without
 * turning the others away: they go to another candidate when one exists,
 * and — when nothing else is left for them (no fallback model after this
 * one) — join the probed endpoint rather than get a 503. An open circuit
 * keeps everyone out, last resort or not.
 */
import { describe, expect, test } from "bun:test";
import { EndpointChooser } from "../../src/admission/chooser.ts";
import { EndpointDirectory } from "../../src/admission/endpoint-directory.ts";
import { buildConfig } from "../../src/config/load.ts";
import { SchedulingProfile } from "../../src/scheduling/profile.ts";
import { CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, CIRCUIT_PROBING, EndpointTable, I, modelCircuitField } from "../../src/shared/endpoint-table.ts";

function fleet(endpoints: number) {
  const config = buildConfig({ endpoints: Array.from({ length: endpoints }, (_, i) => ({ id: `e${i}`, url: `http://127.0.0.1:${9000 + i}`, models: ["m"] })) });
  const table = new EndpointTable(4);
  const descriptors = Array.from({ length: endpoints }, (_, i) => ({ index: i, id: `e${i}`, pool: 0, poolName: "default", models: ["m"] }));
  for (const d of descriptors) table.setInt(d.index, I.READY, 1);
  const chooser = new EndpointChooser(table, new EndpointDirectory(descriptors), new SchedulingProfile(config.scheduling), 60_000);
  return { table, chooser };
}

const M = modelCircuitField(0);

describe("a half-open circuit", () => {
  test("takes one request as its probe; the next goes to the other endpoint", () => {
    const { table, chooser } = fleet(2);
    table.setInt(0, M, CIRCUIT_HALF_OPEN);
    const taken = [0, 1, 2, 3].map(() => chooser.choose({ model: "m", prefixHashes: [] }));
    const probes = taken.filter((c) => c.ok && c.index === 0);
    expect(probes.length).toBe(1);
    expect(probes[0]!.ok && probes[0]!.probe).toBe(M);
    expect(table.getInt(0, M)).toBe(CIRCUIT_PROBING);
    expect(taken.every((c) => c.ok)).toBe(true);
  });

  test("alone: a second request is turned away unless nothing else is left for it, then it joins without the probe slot", () => {
    const { table, chooser } = fleet(1);
    table.setInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN);
    const probe = chooser.choose({ model: "m", prefixHashes: [] });
    expect(probe.ok && probe.probe).toBe(I.CIRCUIT);
    expect(chooser.choose({ model: "m", prefixHashes: [] }).ok).toBe(false); // a fallback exists: it goes there
    const joined = chooser.choose({ model: "m", prefixHashes: [], lastResort: true });
    expect(joined.ok && [joined.index, joined.probe]).toEqual([0, -1]);
    expect(table.getInt(0, I.CIRCUIT)).toBe(CIRCUIT_PROBING);
    expect(table.getInt(0, I.INFLIGHT)).toBe(2);
  });

  test("an open circuit keeps even a last resort out", () => {
    const { table, chooser } = fleet(1);
    table.setInt(0, M, CIRCUIT_OPEN);
    expect(chooser.choose({ model: "m", prefixHashes: [], lastResort: true }).ok).toBe(false);
  });
});
