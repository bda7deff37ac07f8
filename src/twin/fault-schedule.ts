/**
 * The faults of a twin run (faults.ts) applied to its engines and its
 * gateway at their simulated times, and what the gateway made of each: when
 * the engine's endpoint left rotation (not ready, a circuit open, its GPU
 * flagged faulted or the endpoint draining, as the choosers read the
 * endpoint table) and when it was back.
 */
import { CIRCUIT_OPEN, I } from "../shared/endpoint-table.ts";
import type { TwinFault } from "./faults.ts";
import type { TwinFleet } from "./twin-fleet.ts";

/** How often the endpoint table is looked at for a faulted engine's rotation, simulated ms. */
const WATCH_EVERY_MS = 50;

/** One fault and what the gateway did about it (times are simulated ms from the run's start). */
export interface FaultOutcome {
  spec: string;
  kind: TwinFault["kind"];
  engine: string;
  atMs: number;
  /** When the fault ended (a fresh process up, the stall or slowdown over); null: it lasted the run. */
  endedAtMs: number | null;
  /** When the gateway first kept the endpoint out of rotation, and why; null: it never did. */
  outAtMs: number | null;
  outBecause: string | null;
  /** When the endpoint was back in rotation after it; null: it never was. */
  backAtMs: number | null;
  /** A drain: when its process stopped, and the open streams moved off it at the grace period. */
  stoppedAtMs?: number | null;
  evicted?: number;
}

/** Why the endpoint in `row` is out of rotation now, or undefined when it is in. */
function outOfRotation(fleet: TwinFleet, row: number): string | undefined {
  const t = fleet.gateway.tables.table;
  if (t.getInt(row, I.DRAINING) === 1) return "draining";
  if (t.getInt(row, I.GPU_FAULTED) === 1) return "gpu_faulted";
  if (t.getInt(row, I.READY) !== 1) return "not_ready";
  if (t.getInt(row, I.CIRCUIT) === CIRCUIT_OPEN || t.getInt(row, fleet.gateway.modelCircuit) === CIRCUIT_OPEN) return "circuit_open";
  return undefined;
}

/** Schedule every fault on the fleet's clock; the outcomes fill in as the run goes. `running`: false once the run is over (the watches stop). */
export function scheduleFaults(fleet: TwinFleet, faults: readonly TwinFault[], running: () => boolean): FaultOutcome[] {
  const { clock, engines, gateway } = fleet;
  return faults.map((f) => {
    if (f.kind === "drain-node") return drainNode(fleet, f);
    const e = engines[f.engine]!;
    const out: FaultOutcome = {
      spec: f.spec,
      kind: f.kind,
      engine: e.id,
      atMs: f.atMs,
      endedAtMs: null,
      outAtMs: null,
      outBecause: null,
      backAtMs: null,
      ...(f.kind === "drain" ? { stoppedAtMs: null, evicted: 0 } : {}),
    };
    const endAt = f.atMs + f.forMs;
    const ended = () => {
      out.endedAtMs = clock.now;
    };
    const watch = () => {
      if (!running()) return;
      // A killed engine the fleet manager launched again: the fault is over when its process is up.
      if (f.kind === "kill" && out.endedAtMs === null && clock.now > f.atMs && !e.down) out.endedAtMs = clock.now;
      const why = outOfRotation(fleet, f.engine);
      if (out.outAtMs === null) {
        // Only while the fault is in force: what takes the engine out later is another fault's doing.
        if (clock.now >= endAt) return;
        if (why !== undefined) {
          out.outAtMs = clock.now;
          out.outBecause = why;
        }
      } else if (why === undefined && out.endedAtMs !== null) {
        out.backAtMs = clock.now;
        return;
      }
      clock.after(WATCH_EVERY_MS, watch);
    };
    clock.at(f.atMs, () => {
      switch (f.kind) {
        case "kill":
          e.kill();
          if (endAt !== Infinity)
            clock.at(endAt, () => {
              e.restart();
              ended();
            });
          break;
        case "stall":
          e.stall(endAt);
          if (endAt !== Infinity) clock.at(endAt, ended);
          break;
        case "slow":
          e.core.slowdown = f.factor;
          if (endAt !== Infinity)
            clock.at(endAt, () => {
              e.core.slowdown = 1;
              ended();
            });
          break;
        case "gpu":
          gateway.setGpuFault(f.engine, true);
          if (endAt !== Infinity)
            clock.at(endAt, () => {
              gateway.setGpuFault(f.engine, false);
              ended();
            });
          break;
        case "drain":
          drain(fleet, f, out, endAt, ended);
          break;
        case "drain-node":
          break;
      }
      watch();
    });
    return out;
  });
}

/**
 * `llmgw ctl drain` of a node: the fleet manager's planner replaces its
 * replicas elsewhere and stops them; the outcome says when the drain
 * finished (its last replica stopped). FOR after it began, the node is
 * uncordoned.
 */
function drainNode(fleet: TwinFleet, f: TwinFault): FaultOutcome {
  const { clock, gateway } = fleet;
  const manager = fleet.manager!;
  const out: FaultOutcome = {
    spec: f.spec,
    kind: f.kind,
    engine: `node-${f.engine}`,
    atMs: f.atMs,
    endedAtMs: null,
    outAtMs: null,
    outBecause: null,
    backAtMs: null,
    stoppedAtMs: null,
  };
  clock.at(f.atMs, () => {
    const op = manager.drainNode(f.engine, gateway.config.fleet.drainGraceMs);
    out.outAtMs = clock.now;
    out.outBecause = "cordoned";
    const watch = () => {
      if (op.finishedAt !== null) out.stoppedAtMs = op.finishedAt;
      else clock.after(WATCH_EVERY_MS, watch);
    };
    watch();
    if (f.forMs !== Infinity)
      clock.at(f.atMs + f.forMs, () => {
        manager.uncordon(f.engine);
        out.endedAtMs = out.backAtMs = clock.now;
      });
  });
  return out;
}

/**
 * The fleet's drain of one replica: no new requests; its process stops once
 * nothing holds it, or at the drain's grace period, its open streams moved
 * to other replicas first; a fresh replica in its place `forMs` after the
 * drain began.
 */
function drain(fleet: TwinFleet, f: TwinFault, out: FaultOutcome, endAt: number, ended: () => void): void {
  const { clock, engines, gateway } = fleet;
  const e = engines[f.engine]!;
  const { drainGraceMs, reconcileIntervalMs } = gateway.config.fleet;
  gateway.setDraining(f.engine, true);
  const graceAt = clock.now + drainGraceMs;
  const check = () => {
    if (e.down) return;
    if (gateway.inflight(f.engine) > 0 && clock.now < graceAt) return clock.after(reconcileIntervalMs, check);
    out.evicted = gateway.evictions.evict(f.engine);
    e.kill();
    out.stoppedAtMs = clock.now;
  };
  check();
  if (endAt !== Infinity)
    clock.at(endAt, () => {
      if (!e.down) {
        out.evicted = (out.evicted ?? 0) + gateway.evictions.evict(f.engine);
        e.kill();
        out.stoppedAtMs ??= clock.now;
      }
      e.restart();
      gateway.setDraining(f.engine, false);
      ended();
    });
}
