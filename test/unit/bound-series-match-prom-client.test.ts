/**
 * Bound series (src/metrics/bound-series.ts) write into prom-client's own
 * entries: the same observations through a bound series and through
 * prom-client's children give the same exposition, byte for byte; a reset or a
 * removed label set rebinds; nothing a bound series is given throws.
 */
import { expect, test } from "bun:test";
import { Counter, Histogram, Registry } from "prom-client";
import { boundCounter, boundHistogram } from "../../src/metrics/bound-series.ts";

const BUCKETS = [0.005, 0.01, 0.1, 1, 10];
const VALUES = [0, 0.004, 0.005, 0.0051, 0.2, 1, 9.99, 10, 11, 400, 0.01];

function pair() {
  const make = () => {
    const registry = new Registry();
    return {
      registry,
      h: new Histogram({ name: "t_seconds", help: "h", labelNames: ["model", "route"], buckets: BUCKETS, registers: [registry] }),
      u: new Histogram({ name: "t_unlabelled_seconds", help: "u", buckets: BUCKETS, registers: [registry] }),
      c: new Counter({ name: "t_total", help: "c", labelNames: ["model", "outcome"], registers: [registry] }),
    };
  };
  return { prom: make(), bound: make() };
}

test("the same observations give the same exposition as prom-client's children", async () => {
  const { prom, bound } = pair();
  const bh = boundHistogram(bound.h, { model: 'm"1', route: "chat" });
  const bh2 = boundHistogram(bound.h, { model: "m2", route: "chat" });
  const bu = boundHistogram(bound.u);
  const bc = boundCounter(bound.c, { model: 'm"1', outcome: "ok" });
  for (const v of VALUES) {
    prom.h.labels({ model: 'm"1', route: "chat" }).observe(v);
    prom.h.labels({ model: "m2", route: "chat" }).observe(v * 2);
    prom.u.observe(v);
    prom.c.labels({ model: 'm"1', outcome: "ok" }).inc(v);
    bh.observe(v);
    bh2.observe(v * 2);
    bu.observe(v);
    bc.inc(v);
  }
  prom.c.labels({ model: 'm"1', outcome: "ok" }).inc();
  bc.inc();
  expect(await bound.registry.metrics()).toBe(await prom.registry.metrics());
});

test("a bound series and prom-client's child of the same labels add to one entry", async () => {
  const { bound } = pair();
  bound.h.labels({ model: "m", route: "chat" }).observe(0.2);
  const bh = boundHistogram(bound.h, { model: "m", route: "chat" });
  bh.observe(0.2);
  bound.h.labels({ model: "m", route: "chat" }).observe(0.2);
  const v = (await bound.h.get()).values.find((x) => x.metricName === "t_seconds_count");
  expect(v?.value).toBe(3);
});

test("after reset() and remove() a bound series rebinds: its next observations are exported", async () => {
  const { bound } = pair();
  const bh = boundHistogram(bound.h, { model: "m", route: "chat" });
  const bc = boundCounter(bound.c, { model: "m", outcome: "ok" });
  bh.observe(1);
  bc.inc(2);
  bound.h.reset();
  bound.c.reset();
  bh.observe(0.5);
  bc.inc(3);
  expect((await bound.h.get()).values.find((x) => x.metricName === "t_seconds_sum")?.value).toBe(0.5);
  expect((await bound.c.get()).values[0]?.value).toBe(3);
  bound.h.remove({ model: "m", route: "chat" });
  bh.observe(0.25);
  expect((await bound.h.get()).values.find((x) => x.metricName === "t_seconds_sum")?.value).toBe(0.25);
});

test("non-finite and negative values are dropped, not thrown on the request path", async () => {
  const { bound } = pair();
  const bh = boundHistogram(bound.h, { model: "m", route: "chat" });
  const bc = boundCounter(bound.c, { model: "m", outcome: "ok" });
  for (const v of [Number.NaN, Number.POSITIVE_INFINITY]) expect(() => bh.observe(v)).not.toThrow();
  for (const v of [Number.NaN, -1, Number.POSITIVE_INFINITY]) expect(() => bc.inc(v)).not.toThrow();
  bc.inc(1);
  expect((await bound.c.get()).values[0]?.value).toBe(1);
});
