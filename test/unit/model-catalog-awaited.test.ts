/**
 * The catalog tells a model nobody serves (404) from one that may be served
 * soon (503): while some discovered endpoint has not listed its models, or
 * for a model the fleet wants replicas of.
 */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { ModelCatalog } from "../../src/gateway/model-catalog.ts";

describe("a model nothing serves now", () => {
  test("is awaited while a discovered endpoint has not listed its models, unknown once all have", () => {
    const c = new ModelCatalog(buildConfig({ models: [{ name: "m", aliases: ["mm"] }] }));
    c.addEndpoint(0, ["m"]);
    expect(c.awaited("x")).toBe(false); // configured lists only: nothing to wait for
    c.addEndpoint(1, undefined);
    c.addEndpoint(2, undefined);
    expect([c.resolve("x"), c.awaited("x")]).toEqual([undefined, true]);
    c.setDiscovered(1, ["x"]);
    expect(c.resolve("x")).toBe("x");
    expect(c.awaited("y")).toBe(true); // endpoint 2 still has not listed
    c.setDiscovered(2, []); // listed, empty: it serves nothing
    expect(c.awaited("y")).toBe(false);
    c.removeEndpoint(1);
    c.addEndpoint(1, undefined); // a new endpoint in the slot: discovery pending again
    expect(c.awaited("y")).toBe(true);
    c.removeEndpoint(1);
    expect(c.awaited("y")).toBe(false);
  });

  test("is awaited when the fleet wants replicas of it (also by alias)", () => {
    const c = new ModelCatalog(buildConfig({ models: [{ name: "big", aliases: ["b"] }] }));
    c.expectDesired((name) => name === "fleet-model" || name === "big");
    expect([c.awaited("fleet-model"), c.awaited("other")]).toEqual([true, false]);
    expect(c.awaited("b")).toBe(true);
  });
});
