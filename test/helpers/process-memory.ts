/** Resident memory of a process group (the gateway and whatever launcher started it), read from /proc, and a sampler of its peak. */
import { readdirSync, readFileSync } from "node:fs";

/** The largest resident set (bytes) among the processes of group `pgid`: the gateway itself, not its launcher. */
export function groupRssBytes(pgid: number): number {
  let max = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, "utf8");
      // Fields after the command name (which may hold spaces): state, ppid, pgrp …
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) !== pgid) continue;
      const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${entry}/status`, "utf8"));
      if (rss) max = Math.max(max, Number(rss[1]) * 1024);
    } catch {
      // the process ended while we looked
    }
  }
  return max;
}

/** Sample the group's RSS every `everyMs` until stopped; returns the peak. */
export function sampleRss(pgid: number, everyMs = 50): { stop(): number } {
  let peak = groupRssBytes(pgid);
  const timer = setInterval(() => (peak = Math.max(peak, groupRssBytes(pgid))), everyMs);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, groupRssBytes(pgid));
    },
  };
}
