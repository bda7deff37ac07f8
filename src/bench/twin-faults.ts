/**
 * `--fault` on the twin benches: the faults scheduled in a run (the syntax
 * is src/twin/faults.ts's), and the report of what the gateway did about
 * them — each fault's time out of rotation and back, and the requests'
 * retries, continuations and failures.
 */
import { stringListFlag, UsageError } from "../shared/flags.ts";
import type { FaultOutcome } from "../twin/fault-schedule.ts";
import { FAULT_SYNTAX, parseTwinFaults, type TwinFault } from "../twin/faults.ts";
import type { TwinFleetReport } from "../twin/twin-fleet-manager.ts";
import type { RequestRecord } from "./replay/open-loop-driver.ts";
import type { TwinOpenLoopResult } from "./replay/twin-open-loop.ts";
import { formatTable } from "./report.ts";

/** The flag's lines in a bench's usage, its text starting at `column` (where the bench's other flags' text starts). */
export function faultUsage(column: number): string {
  const pad = " ".repeat(column);
  const lines = [
    `with --twin: a fault at a simulated time, repeatable:`,
    `${FAULT_SYNTAX};`,
    `kill: the engine dies (back FOR later, cache empty); stall: it`,
    `makes no step for FOR; slow: its steps take FACTOR times as`,
    `long; gpu: its dcgm-exporter reports a GPU fault; drain: the`,
    `fleet drains it (back FOR later); drain-node (with a fleet of`,
    `nodes): the node is drained, its replicas replaced elsewhere`,
    `(uncordoned FOR later). Times in ms, s or m`,
  ];
  return `${"  --fault SPEC".padEnd(column)}${lines.join(`\n${pad}`)}`;
}

/**
 * `--fault` values for a fleet of `engines` (`nodes`: its nodes, with
 * --fleet). In the twin, any; on real processes only where the bench can
 * do them (`realTime`: it checks and says what it cannot), else none.
 */
export function faultsFlag(
  args: Parameters<typeof stringListFlag>[0],
  engines: number,
  twin: boolean,
  nodes = 0,
  realTime?: (faults: TwinFault[]) => TwinFault[],
): TwinFault[] {
  const raws = stringListFlag(args, "fault");
  if (raws.length === 0) return [];
  if (!twin && realTime === undefined) throw new UsageError("--fault schedules faults in the fleet twin: give --twin too");
  const faults = parseTwinFaults(raws, engines, nodes);
  return twin ? faults : realTime!(faults);
}

/** What failing engines did to a run's requests, and what the gateway did about each fault. */
export interface TwinFailures {
  /** Failed attempts before a first token that were tried again. */
  retries: number;
  /** Broken streams a continuation mended. */
  recoveries: number;
  /** Requests that got an error status. */
  refused: number;
  /** Streams that broke and were not mended (the client got the break's error event). */
  broken: number;
  faults: FaultOutcome[];
}

export function twinFailures(result: TwinOpenLoopResult): TwinFailures {
  return failuresOf(result.records, result.retries, result.recoveries, result.faults);
}

/** A run's failures from its records (refused: an error status; broken: a stream that ended in an error, the run's own end aside) and the gateway's counts. */
export function failuresOf(records: readonly RequestRecord[], retries: number, recoveries: number, faults: FaultOutcome[]): TwinFailures {
  let refused = 0;
  let broken = 0;
  for (const r of records) {
    if (r.status !== 200 && r.status !== 0) refused++;
    else if (r.status === 200 && r.error !== undefined && !r.error.startsWith("unfinished")) broken++;
  }
  return { retries, recoveries, refused, broken, faults };
}

const seconds = (ms: number | null | undefined, from: number) => (ms === null || ms === undefined ? "never" : `+${((ms - from) / 1000).toFixed(2)} s`);

/** One table: each run's faults with when the endpoint left rotation and came back, and the run's retries, continuations and failures. */
export function formatTwinFailures(runs: readonly { name: string; failures: TwinFailures }[]): string {
  return formatTable({
    title: "faults (times after each fault began, simulated): when the gateway kept the engine out of rotation and why, when it was back; the run's requests",
    columns: ["run", "fault", "out of rotation", "ended", "back", "retries", "continued", "refused", "broken"],
    rows: runs.flatMap(({ name, failures: f }) =>
      f.faults.map((x, i) => [
        i === 0 ? name : "",
        x.spec,
        x.outAtMs === null ? "never" : `${seconds(x.outAtMs, x.atMs)} (${x.outBecause})`,
        x.kind === "drain" || x.kind === "drain-node"
          ? `stopped ${seconds(x.stoppedAtMs, x.atMs)}${x.evicted === undefined ? "" : `, ${x.evicted} moved`}`
          : seconds(x.endedAtMs, x.atMs),
        x.outAtMs === null ? "—" : seconds(x.backAtMs, x.atMs),
        i === 0 ? String(f.retries) : "",
        i === 0 ? String(f.recoveries) : "",
        i === 0 ? String(f.refused) : "",
        i === 0 ? String(f.broken) : "",
      ]),
    ),
  });
}

/** The fleet of nodes of a twin run: its replicas, GPU-hours, serving count and the planner's actions by kind. */
export function formatTwinFleet(f: TwinFleetReport): string {
  const byKind = new Map<string, number>();
  for (const a of f.actions) byKind.set(a.kind, (byKind.get(a.kind) ?? 0) + 1);
  return formatTable({
    title: `fleet: ${f.nodes} nodes × ${f.gpus_per_node} GPUs, ${f.desired} replicas of ${f.tensor_parallel} GPU(s) desired, ${f.startup_s} s start-up (the fleet manager's planner)`,
    columns: ["", "value"],
    rows: [
      ["replicas launched / stopped", `${f.launched} / ${f.stopped}`],
      ["replicas serving: mean / min / max", `${f.serving.mean} / ${f.serving.min} / ${f.serving.max}`],
      ["GPU-hours", String(f.gpu_hours)],
      ["planner actions", `${f.actions_total}: ${[...byKind].map(([k, n]) => `${n} × ${k}`).join(", ")}`],
    ],
  });
}
