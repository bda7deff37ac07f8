/**
 * Linux /proc readers for supervision: a process's command line, process
 * group, start time and liveness. Zombies count as gone: they hold no
 * memory, ports or GPU contexts, and only their parent can reap them.
 */
import { readdirSync, readFileSync } from "node:fs";

interface ProcStat {
  pid: number;
  /** One-letter state: R, S, D, Z (zombie), T… */
  state: string;
  ppid: number;
  pgid: number;
  /** Clock ticks since boot when the process started: with the pid, it names one process for good. */
  startTime: number;
}

/** Parse /proc/<pid>/stat; the command name (field 2) may hold spaces and parentheses, so split after the last ')'. */
export function parseProcStat(text: string): ProcStat | undefined {
  const close = text.lastIndexOf(")");
  const pid = Number(text.slice(0, text.indexOf(" ")));
  if (close < 0 || !Number.isInteger(pid)) return undefined;
  const rest = text
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  // rest[0] is field 3 (state); ppid is field 4, pgrp field 5, starttime field 22.
  const state = rest[0];
  const ppid = Number(rest[1]);
  const pgid = Number(rest[2]);
  const startTime = Number(rest[19]);
  if (state === undefined || !Number.isInteger(ppid) || !Number.isInteger(pgid) || !Number.isFinite(startTime)) return undefined;
  return { pid, state, ppid, pgid, startTime };
}

export function readStat(pid: number): ProcStat | undefined {
  try {
    return parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return undefined;
  }
}

/** argv of a live process (NUL-separated in /proc); undefined when gone or unreadable. */
export function readCmdline(pid: number): string[] | undefined {
  try {
    const raw = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (raw === "") return undefined; // zombies and kernel threads
    return raw.replace(/\0$/, "").split("\0");
  } catch {
    return undefined;
  }
}

export function isAlive(pid: number): boolean {
  const st = readStat(pid);
  return st !== undefined && st.state !== "Z";
}

/** Live (non-zombie) members of process group `pgid`, by scanning /proc. */
export function groupMembers(pgid: number): number[] {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    const st = readStat(Number(e));
    if (st && st.pgid === pgid && st.state !== "Z") out.push(st.pid);
  }
  return out;
}

function basename(p: string): string {
  return p.slice(p.lastIndexOf("/") + 1);
}

/**
 * Whether a live command line is the one we launched. Exact equality, or the
 * shape a `#!` script takes after exec (`python3 /usr/bin/vllm serve …`): the
 * launched arguments as a suffix, preceded by the launched program by name.
 */
export function cmdlineMatches(launched: readonly string[], live: readonly string[]): boolean {
  if (launched.length === 0 || live.length < launched.length) return false;
  if (launched.length === live.length && launched.every((a, i) => a === live[i])) return true;
  const offset = live.length - launched.length;
  const suffixOk = launched.slice(1).every((a, i) => a === live[offset + 1 + i]);
  const program = basename(launched[0] ?? "");
  return suffixOk && program !== "" && basename(live[offset] ?? "") === program;
}
