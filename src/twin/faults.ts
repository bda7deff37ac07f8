/**
 * Faults scheduled in a twin run (`--fault`, repeatable):
 *
 *     KIND:ENGINE@AT[+FOR][:FACTOR]
 *
 * ENGINE is an engine's slot (0, 1 …) or id (engine-0 …); AT and FOR are
 * simulated times from the run's start, in ms, s or m (a bare number is
 * seconds). The kinds, and what FOR means for each:
 *
 * - `kill`: the engine's process dies (its streams break, its port refuses,
 *   its polls fail); FOR later a fresh one is up, with an empty cache.
 * - `stall`: the engine stops stepping for FOR (forever without it): its
 *   streams fall silent, its API server still answers polls.
 * - `slow`: every step takes FACTOR times as long, for FOR.
 * - `gpu`: the engine's GPU reports a fault to its dcgm-exporter for FOR;
 *   the engine itself keeps running.
 * - `drain`: the fleet drains the engine (no new requests; its process
 *   stops when its last request ends, or at the drain's grace period, its
 *   open streams moved elsewhere); FOR after the drain began a fresh
 *   replica takes its place, as in a rolling upgrade.
 * - `drain-node` (a fleet of nodes only; ENGINE is then a node, 0 … or
 *   node-0 …): `llmgw ctl drain` of the node; the fleet manager's planner
 *   places replacements elsewhere and stops the node's replicas once they
 *   serve, or at the grace period; FOR after the drain began the node is
 *   uncordoned.
 *
 * In a fleet of nodes the fleet manager owns the engines: a killed engine's
 * replica is launched again by it (after the start-up time), so `kill`
 * takes no FOR there, and `drain` gives way to `drain-node`.
 */
import { UsageError } from "../shared/flags.ts";

type TwinFaultKind = "kill" | "stall" | "slow" | "gpu" | "drain" | "drain-node";

export interface TwinFault {
  kind: TwinFaultKind;
  /** The engine's slot (a node's index for drain-node). */
  engine: number;
  atMs: number;
  /** How long the fault lasts (Infinity: to the end of the run). */
  forMs: number;
  /** `slow`: how many times as long a step takes; 1 otherwise. */
  factor: number;
  /** As given on the command line. */
  spec: string;
}

const KINDS: readonly TwinFaultKind[] = ["kill", "stall", "slow", "gpu", "drain", "drain-node"];
/** More faults than this in one run is a mistake in a script, not a scenario. */
const MAX_TWIN_FAULTS = 1_000;
/** Longest a fault may be scheduled, simulated ms (a week). */
const MAX_FAULT_TIME_MS = 7 * 24 * 3_600_000;
const MAX_SLOW_FACTOR = 1_000;
export const FAULT_SYNTAX = "KIND:ENGINE@AT[+FOR][:FACTOR] (kill, stall, slow, gpu, drain or drain-node; e.g. kill:1@60s+90s, slow:0@30s+60s:3)";

/** One `--fault` value, checked against `engines` engine slots and, in a fleet of nodes, its `nodes` (0: no fleet of nodes). */
export function parseTwinFault(raw: string, engines: number, nodes = 0): TwinFault {
  const bad = (why: string) => new UsageError(`--fault '${raw}': ${why}; expected ${FAULT_SYNTAX}`);
  const m = /^([a-z-]+):([A-Za-z0-9-]+)@([0-9.]+[a-z]*)(?:\+([0-9.]+[a-z]*))?(?::([0-9.]+))?$/.exec(raw.trim());
  if (!m) throw bad("not a fault");
  const kind = m[1] as TwinFaultKind;
  if (!KINDS.includes(kind)) throw bad(`unknown kind '${m[1]}'`);
  const onNode = kind === "drain-node";
  if (onNode && nodes === 0) throw bad("drain-node drains a node of a fleet of nodes (--fleet)");
  const engine = slotOf(m[2]!, onNode ? "node" : "engine");
  if (onNode && (engine === undefined || engine >= nodes))
    throw bad(`no node '${m[2]}' in a fleet of ${nodes} nodes (nodes are 0…${nodes - 1} or node-0…node-${nodes - 1})`);
  if (!onNode && (engine === undefined || engine >= engines))
    throw bad(`no engine '${m[2]}' in a fleet of ${engines} (engines are 0…${engines - 1} or engine-0…engine-${engines - 1})`);
  const atMs = duration(m[3]!);
  if (atMs === undefined) throw bad(`'${m[3]}' is not a time (a number of ms, s or m)`);
  const forMs = m[4] === undefined ? Infinity : duration(m[4]);
  if (forMs === undefined || forMs <= 0) throw bad(`'${m[4]}' is not a positive time`);
  let factor = 1;
  if (kind === "slow") {
    factor = Number(m[5]);
    if (m[5] === undefined || !Number.isFinite(factor) || factor <= 1 || factor > MAX_SLOW_FACTOR)
      throw bad(`slow needs a factor above 1 and at most ${MAX_SLOW_FACTOR} (…:3)`);
  } else if (m[5] !== undefined) throw bad(`only slow takes a factor`);
  if (nodes > 0 && kind === "kill" && forMs !== Infinity)
    throw bad("in a fleet of nodes the fleet manager launches a killed replica again: kill takes no FOR there");
  if (nodes > 0 && kind === "drain") throw bad("in a fleet of nodes the fleet manager owns its replicas: drain a node with drain-node");
  return { kind, engine: engine!, atMs, forMs, factor, spec: raw.trim() };
}

/** Every `--fault` value, in time order (ties as given). */
export function parseTwinFaults(raws: readonly string[], engines: number, nodes = 0): TwinFault[] {
  if (raws.length > MAX_TWIN_FAULTS) throw new UsageError(`--fault: at most ${MAX_TWIN_FAULTS} faults in a run (${raws.length} given)`);
  return raws.map((r) => parseTwinFault(r, engines, nodes)).sort((a, b) => a.atMs - b.atMs);
}

function slotOf(s: string, prefix: "engine" | "node"): number | undefined {
  const m = (prefix === "engine" ? /^(?:engine-)?(\d{1,6})$/ : /^(?:node-)?(\d{1,6})$/).exec(s);
  return m ? Number(m[1]) : undefined;
}

function duration(s: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m)?$/.exec(s);
  if (!m) return undefined;
  const v = Number(m[1]) * (m[2] === "ms" ? 1 : m[2] === "m" ? 60_000 : 1_000);
  return Number.isFinite(v) && v <= MAX_FAULT_TIME_MS ? v : undefined;
}
