import { describe, expect, test } from "bun:test";
import { CircuitBreakers } from "../../src/gateway/circuit-breaker.ts";
import { CIRCUIT_HALF_OPEN, CIRCUIT_PROBING, EndpointTable, I } from "../../src/shared/endpoint-table.ts";

describe("circuit breaker", () => {
  test("opens after the threshold, half-opens after the open period, closes on the probe's success", async () => {
    const t = new EndpointTable(1);
    const b = new CircuitBreakers(t, { failureThreshold: 2, openMs: 30 });
    b.failure(0);
    expect(b.state(0)).toBe("closed");
    b.failure(0);
    expect(b.state(0)).toBe("open");
    await Bun.sleep(50);
    expect(b.state(0)).toBe("half_open");
    // The scheduler takes the probe slot by compare-and-swap.
    expect(t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING)).toBe(true);
    expect(t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING)).toBe(false);
    b.success(0);
    expect(b.state(0)).toBe("closed");
    b.stop();
  });

  test("a failed probe reopens for longer; an abandoned probe frees the slot", async () => {
    const t = new EndpointTable(1);
    const b = new CircuitBreakers(t, { failureThreshold: 1, openMs: 30 });
    b.failure(0);
    await Bun.sleep(45);
    t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING);
    b.abandon(0);
    expect(b.state(0)).toBe("half_open");
    t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING);
    b.failure(0);
    expect(b.state(0)).toBe("open");
    await Bun.sleep(45); // 2 × 30 ms now
    expect(b.state(0)).toBe("open");
    await Bun.sleep(40);
    expect(b.state(0)).toBe("half_open");
    b.stop();
  });

  test("an engine's Retry-After cools down and returns to closed, not to single-probe mode", async () => {
    const t = new EndpointTable(1);
    const b = new CircuitBreakers(t, { failureThreshold: 5, openMs: 10_000 });
    b.coolDown(0, I.CIRCUIT, 30);
    expect(b.state(0)).toBe("open");
    await Bun.sleep(50);
    expect(b.state(0)).toBe("closed");
    b.stop();
  });
});

describe("circuit breaker, per model and capped", () => {
  test("a model's circuit opens and closes on its own, leaving the endpoint's and the other models' alone", async () => {
    const t = new EndpointTable(1);
    const b = new CircuitBreakers(t, { failureThreshold: 1, openMs: 30 });
    const m0 = I.MODEL_CIRCUITS;
    b.failure(0, m0);
    expect(b.state(0, m0)).toBe("open");
    expect(b.state(0)).toBe("closed");
    expect(b.state(0, m0 + 1)).toBe("closed");
    await Bun.sleep(45);
    expect(b.state(0, m0)).toBe("half_open");
    b.stop();
  });

  test("the open period doubles after each failed probe, but never past max_open_ms", async () => {
    const t = new EndpointTable(1);
    const b = new CircuitBreakers(t, { failureThreshold: 1, openMs: 20, maxOpenMs: 50 });
    b.failure(0);
    for (let i = 0; i < 4; i++) {
      // Each failed probe reopens: 40, then 50 (capped), 50, 50 ms.
      await Bun.sleep(i === 0 ? 30 : 60);
      expect(b.state(0)).toBe("half_open");
      expect(t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING)).toBe(true);
      b.failure(0);
      expect(b.state(0)).toBe("open");
    }
    await Bun.sleep(60); // past the 50 ms cap: never 160 or 320 ms
    expect(b.state(0)).toBe("half_open");
    b.stop();
  });
});

describe("circuit breaker, actively probed", () => {
  const TARGET = { route: "chat", model: "m" } as const;
  const probing = (intervalMs: number) => ({ failureThreshold: 1, openMs: 20, maxOpenMs: 40, probe: { enabled: true, intervalMs, timeoutMs: 1_000 } });

  /** A probe sender whose verdicts the test sets, recording when each probe went. */
  function scripted() {
    const sent: { at: number; field: number; model: string }[] = [];
    let healthy = false;
    const send = async (_index: number, field: number, target: { model: string }) => {
      sent.push({ at: performance.now(), field, model: target.model });
      return healthy ? ({ ok: true } as const) : ({ ok: false } as const);
    };
    return { sent, send, set: (h: boolean) => (healthy = h) };
  }

  test("an open circuit is probed every interval while it fails, never less often; a success half-opens it, the next probe closes it", async () => {
    const t = new EndpointTable(1);
    const p = scripted();
    const b = new CircuitBreakers(t, { ...probing(25), maxOpenMs: 60_000 }, () => {}, p.send);
    const opened = performance.now();
    b.failure(0, I.CIRCUIT, TARGET);
    expect(b.state(0)).toBe("open");
    await Bun.sleep(400);
    // First probe after open_ms (20 ms), then one every 25 ms however long the
    // outage: ~15 in 400 ms (doubling would have sent 4).
    expect(p.sent.length).toBeGreaterThanOrEqual(8);
    expect(p.sent[0]!.at - opened).toBeGreaterThanOrEqual(15);
    expect(p.sent.every((s) => s.model === "m")).toBe(true);
    expect(b.state(0)).toBe("open");
    p.set(true);
    await Bun.sleep(45);
    expect(["half_open", "closed"]).toContain(b.state(0));
    await Bun.sleep(45);
    // Nobody took the half-open slot: the next probe closed it.
    expect(b.state(0)).toBe("closed");
    const after = p.sent.length;
    await Bun.sleep(80);
    expect(p.sent.length).toBe(after); // a closed circuit is not probed
    b.stop();
  });

  test("half-open after a probe: a request takes the single slot and its success closes the circuit", async () => {
    const t = new EndpointTable(1);
    const p = scripted();
    p.set(true);
    const b = new CircuitBreakers(t, probing(1_000), () => {}, p.send);
    b.failure(0, I.MODEL_CIRCUITS, TARGET);
    await Bun.sleep(40);
    expect(b.state(0, I.MODEL_CIRCUITS)).toBe("half_open");
    expect(t.casInt(0, I.MODEL_CIRCUITS, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING)).toBe(true);
    b.success(0, I.MODEL_CIRCUITS);
    expect(b.state(0, I.MODEL_CIRCUITS)).toBe("closed");
    b.stop();
  });

  test("a request that fails as the probe reopens the circuit; active probes resume after one interval", async () => {
    const t = new EndpointTable(1);
    const p = scripted();
    p.set(true);
    const b = new CircuitBreakers(t, probing(40), () => {}, p.send);
    b.failure(0, I.CIRCUIT, TARGET);
    await Bun.sleep(30);
    expect(b.state(0)).toBe("half_open");
    t.casInt(0, I.CIRCUIT, CIRCUIT_HALF_OPEN, CIRCUIT_PROBING);
    p.set(false);
    const n = p.sent.length;
    b.failure(0, I.CIRCUIT, TARGET);
    expect(b.state(0)).toBe("open");
    await Bun.sleep(70);
    expect(p.sent.length).toBeGreaterThan(n);
    expect(b.state(0)).toBe("open");
    b.stop();
  });

  test("a probe answered after the endpoint's slot was reset says nothing about the new one", async () => {
    const t = new EndpointTable(1);
    let release: (v: { ok: true }) => void = () => {};
    const b = new CircuitBreakers(
      t,
      probing(1_000),
      () => {},
      () => new Promise((r) => (release = r)),
    );
    b.failure(0, I.CIRCUIT, TARGET);
    await Bun.sleep(30); // the probe is on its way
    b.reset(0);
    b.failure(0, I.CIRCUIT, TARGET);
    release({ ok: true });
    await Bun.sleep(5);
    expect(b.state(0)).toBe("open");
    b.stop();
  });

  test("without a failure that says what to probe with, or with probing off, the open period ends by the clock", async () => {
    const t = new EndpointTable(2);
    const p = scripted();
    const b = new CircuitBreakers(t, probing(1_000), () => {}, p.send);
    b.failure(0);
    const off = new CircuitBreakers(t, { ...probing(1_000), probe: { enabled: false, intervalMs: 1_000, timeoutMs: 1_000 } }, () => {}, p.send);
    off.failure(1, I.CIRCUIT, TARGET);
    await Bun.sleep(40);
    expect([b.state(0), off.state(1)]).toEqual(["half_open", "half_open"]);
    expect(p.sent).toEqual([]);
    b.stop();
    off.stop();
  });
});
