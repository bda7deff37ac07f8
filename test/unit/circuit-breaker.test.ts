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
