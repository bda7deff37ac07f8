/**
 * CPU time of a process and of one of its threads, from Linux's
 * /proc/PID/task/TID/schedstat (nanoseconds on the CPU, exact, unlike the
 * 10 ms ticks of /proc/PID/stat). A Bun process's main thread has the
 * process's pid as its thread id. Undefined where /proc is not Linux's.
 */
import { readdirSync, readFileSync } from "node:fs";

function schedNs(pid: number, tid: number): number | undefined {
  try {
    const first = readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0];
    const ns = Number(first);
    return Number.isFinite(ns) ? ns : undefined;
  } catch {
    return undefined;
  }
}

export interface CpuSample {
  /** The main thread (the event loop that serves requests). */
  mainNs: number;
  /** Every thread of the process (workers, HTTP client, GC …). */
  totalNs: number;
}

export function cpuSample(pid: number): CpuSample | undefined {
  const main = schedNs(pid, pid);
  if (main === undefined) return undefined;
  let total = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) total += schedNs(pid, Number(tid)) ?? 0;
  } catch {
    return undefined;
  }
  return { mainNs: main, totalNs: total };
}

/** CPU spent between two samples (threads that ended in between are not counted). */
export function cpuDelta(before: CpuSample | undefined, after: CpuSample | undefined): CpuSample | undefined {
  if (!before || !after) return undefined;
  return { mainNs: after.mainNs - before.mainNs, totalNs: Math.max(0, after.totalNs - before.totalNs) };
}
