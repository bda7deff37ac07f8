/**
 * Faults scheduled in a twin run, handled by the gateway's own parts: an
 * engine killed mid-run has its open streams continued elsewhere and leaves
 * rotation (circuits, readiness) until a fresh one is up; a stalled engine's
 * silent streams move on at the idle deadline; a drained engine takes no new
 * request and its streams move at the grace period; a GPU fault keeps
 * requests off its engine from the next DCGM poll. Every request gets every
 * token it asked for, and the same faults give the same run.
 */
import { describe, expect, test } from "bun:test";
import type { ScheduledRequest } from "../../src/bench/replay/open-loop-driver.ts";
import { runTwinOpenLoop, type TwinOpenLoopResult } from "../../src/bench/replay/twin-open-loop.ts";
import { UsageError } from "../../src/shared/flags.ts";
import { parseTwinFault, parseTwinFaults } from "../../src/twin/faults.ts";
import { TwinFleet } from "../../src/twin/twin-fleet.ts";

const MAX_TOKENS = 400;

/** 20 requests a second for 3 s, each a prompt of its own and 400 tokens out (a stream of several seconds). */
function requests(): ScheduledRequest[] {
  return Array.from({ length: 60 }, (_, i) => ({ atMs: i * 50, segments: [{ key: `p${i}`, tokens: 300 }], maxTokens: MAX_TOKENS }));
}

async function run(faults: string[], gateway: Record<string, unknown> = {}, engines = 3): Promise<{ fleet: TwinFleet; r: TwinOpenLoopResult }> {
  // No noise on steps or in the API server: each fault lands at a known point of a known request.
  const engineFlags = ["--profile", "h100-llama-3.1-8b", "--jitter", "0", "--frontend-jitter-ms", "0"];
  const fleet = new TwinFleet({ engines, model: "m", engineFlags, gateway, kvEvents: false, seed: 7 });
  const r = await runTwinOpenLoop(fleet, { requests: requests(), drainMs: 120_000, faults: parseTwinFaults(faults, engines) });
  return { fleet, r };
}

function everyTokenDelivered(r: TwinOpenLoopResult): void {
  expect(r.records).toHaveLength(60);
  for (const rec of r.records) {
    expect(rec.error).toBeUndefined();
    expect(rec.status).toBe(200);
    expect(rec.outputTokens).toBe(MAX_TOKENS);
  }
}

describe("faults in the twin", () => {
  test("a killed engine's streams are continued elsewhere; it leaves rotation at once and is back once a fresh process is up", async () => {
    // Circuits probed a second after opening, so that the fresh process is back while requests still come.
    const { fleet, r } = await run(["kill:1@1s+1s"], { circuit_breaker: { open_ms: 1_000 } });
    everyTokenDelivered(r);
    expect(r.recoveries).toBeGreaterThan(0);
    const f = r.faults[0]!;
    // Its broken streams count against its circuit, and its polls fail: out within a poll interval.
    expect(f.outAtMs).not.toBeNull();
    expect(f.outAtMs! - f.atMs).toBeLessThanOrEqual(250);
    expect(f.endedAtMs).toBe(2_000);
    // Back once the fresh process answers a poll and the circuit's probe.
    expect(f.backAtMs).not.toBeNull();
    expect(f.backAtMs!).toBeGreaterThanOrEqual(2_000);
    expect(f.backAtMs!).toBeLessThanOrEqual(2_000 + 2_000 + 250);
    // The fresh process took requests after it was back.
    expect(fleet.engines[1]!.core.stats.requestsTotal).toBeGreaterThan(0);
  });

  test("a request the dying engine had not yet sent a token for is retried, one it had is continued", async () => {
    // At 1,010 ms one request on engine-1 is still in its prefill (sent at 1,000 ms), the others stream.
    const { r } = await run(["kill:1@1010ms"]);
    everyTokenDelivered(r);
    expect(r.retries).toBe(1);
    expect(r.recoveries).toBeGreaterThan(0);
  });

  test("with continuation off in the gateway's config, the streams open on a killed engine end with the break", async () => {
    const { r } = await run(["kill:1@1s"], { continuation: { enabled: false } });
    const broken = r.records.filter((rec) => rec.error?.startsWith("stream broke (cut)") === true);
    expect(broken.length).toBeGreaterThan(0);
    for (const rec of broken) {
      expect(rec.status).toBe(200);
      expect(rec.outputTokens).toBeLessThan(MAX_TOKENS);
    }
    expect(r.recoveries).toBe(0);
  });

  test("a request whose engine refuses its port is retried on another, within max_attempts and the retry budget", async () => {
    // Killed before the first request, its circuit closed and its poll not yet failed: the first requests dial a dead port.
    const { r } = await run(["kill:0@0ms"], { health: { poll_interval_ms: 1_000 } });
    everyTokenDelivered(r);
    expect(r.retries).toBeGreaterThan(0);
    expect(r.records.every((rec) => rec.endpoint !== "engine-0")).toBe(true);
  });

  test("a stalled engine's streams move on at the idle deadline, not at the stall's end", async () => {
    const { r } = await run(["stall:0@1s+20s"], { deadlines: { idle_ms: 1_000, first_token_ms: 2_000 } });
    everyTokenDelivered(r);
    expect(r.recoveries).toBeGreaterThan(0);
    // Nobody waited the 20 s stall out.
    expect(Math.max(...r.records.map((rec) => rec.durationMs))).toBeLessThan(10_000);
  });

  test("a drained engine takes no new request; its process stops at the grace period, its streams moved elsewhere", async () => {
    const { r } = await run(["drain:2@1s"], { fleet: { drain_grace_ms: 500 } });
    everyTokenDelivered(r);
    const f = r.faults[0]!;
    expect(f.outBecause).toBe("draining");
    expect(f.stoppedAtMs).not.toBeNull();
    expect(f.stoppedAtMs! - f.atMs).toBeLessThanOrEqual(1_500);
    expect(f.evicted).toBeGreaterThan(0);
    expect(r.recoveries).toBeGreaterThanOrEqual(f.evicted!);
    for (const rec of r.records) if (rec.atMs >= 1_000) expect(rec.endpoint).not.toBe("engine-2");
  });

  test("a GPU fault keeps new requests off its engine from the next DCGM poll until the fault clears", async () => {
    const { r } = await run(["gpu:1@1s+1500ms"]);
    everyTokenDelivered(r);
    const f = r.faults[0]!;
    expect(f.outBecause).toBe("gpu_faulted");
    // The DCGM poll runs every second (the default) from the fault on.
    expect(f.outAtMs! - f.atMs).toBeLessThanOrEqual(1_000);
    for (const rec of r.records) if (rec.atMs >= f.outAtMs! && rec.atMs < 2_500) expect(rec.endpoint).not.toBe("engine-1");
    expect(r.recoveries).toBe(0);
  });

  test("a slowed engine stays in rotation; its answers take longer", async () => {
    const slow = await run(["slow:0@0ms+10s:4"]);
    const plain = await run([]);
    everyTokenDelivered(slow.r);
    expect(slow.r.faults[0]!.outAtMs).toBeNull();
    const mean = (r: TwinOpenLoopResult) => r.records.reduce((s, rec) => s + rec.durationMs, 0) / r.records.length;
    expect(mean(slow.r)).toBeGreaterThan(mean(plain.r) * 1.2);
  });

  test("the same faults give the same run", async () => {
    const faults = ["kill:1@1500ms+3s", "stall:2@1s+2s", "drain:0@2s+2s"];
    const a = await run(faults, { deadlines: { idle_ms: 1_000 } });
    const b = await run(faults, { deadlines: { idle_ms: 1_000 } });
    expect(JSON.stringify(b.r.records)).toBe(JSON.stringify(a.r.records));
    expect(b.r.faults).toEqual(a.r.faults);
    expect(b.r.recoveries).toBe(a.r.recoveries);
  });
});

describe("--fault values", () => {
  test("each kind, by slot or id, in ms, s or m", () => {
    expect(parseTwinFault("kill:1@60s+90s", 4)).toEqual({ kind: "kill", engine: 1, atMs: 60_000, forMs: 90_000, factor: 1, spec: "kill:1@60s+90s" });
    expect(parseTwinFault("slow:engine-0@1.5m+500ms:3", 4)).toMatchObject({ kind: "slow", engine: 0, atMs: 90_000, forMs: 500, factor: 3 });
    expect(parseTwinFault("drain:3@10", 4)).toMatchObject({ kind: "drain", engine: 3, atMs: 10_000, forMs: Infinity });
    expect(parseTwinFaults(["gpu:0@5s", "stall:1@1s"], 2).map((f) => f.kind)).toEqual(["stall", "gpu"]);
  });

  test("what is not a fault is a usage error that names the value and the syntax", () => {
    for (const [raw, why] of [
      ["explode:1@1s", "unknown kind"],
      ["kill:4@1s", "no engine '4' in a fleet of 4"],
      ["kill:1@soon", "not a fault"],
      ["kill:1@1s+0s", "not a positive time"],
      ["slow:1@1s", "slow needs a factor"],
      ["slow:1@1s+1s:0.5", "slow needs a factor"],
      ["kill:1@1s:2", "only slow takes a factor"],
      ["kill:1@9999999m", "is not a time"],
    ] as const) {
      expect(() => parseTwinFault(raw, 4)).toThrow(UsageError);
      expect(() => parseTwinFault(raw, 4)).toThrow(why);
      expect(() => parseTwinFault(raw, 4)).toThrow(`--fault '${raw}'`);
    }
    expect(() =>
      parseTwinFaults(
        Array.from({ length: 1_001 }, () => "kill:0@1s"),
        1,
      ),
    ).toThrow("at most 1000");
  });
});
