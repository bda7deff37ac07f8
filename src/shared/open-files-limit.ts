/**
 * The open-files limit against the concurrency the gateway is sized for:
 * each open stream holds two sockets (client and engine), plus a reserve for
 * listeners, workers, logs and health polling. The launcher raises the soft
 * limit to the hard one; only root (or LimitNOFILE= in a systemd unit) can
 * raise the hard one, so the gateway says at start when it is too low for
 * the max_open_streams the operator set, and sizes itself to the limit when
 * they set none.
 */
import { readFileSync } from "node:fs";

export const FDS_PER_STREAM = 2;
/** Listeners, worker threads, log output, health polling of engines and exporters. */
export const FD_RESERVE = 256;

export interface OpenFilesLimit {
  /** Infinity for "unlimited". */
  soft: number;
  hard: number;
}

/** The "Max open files" row of a /proc/PID/limits text; undefined when absent. */
export function parseOpenFilesLimit(limitsText: string): OpenFilesLimit | undefined {
  const m = /^Max open files\s+(\S+)\s+(\S+)/m.exec(limitsText);
  if (!m) return undefined;
  const value = (s: string) => (s === "unlimited" ? Number.POSITIVE_INFINITY : Number(s));
  const soft = value(m[1]!);
  const hard = value(m[2]!);
  return Number.isNaN(soft) || Number.isNaN(hard) ? undefined : { soft, hard };
}

/** This process's limit (Linux); undefined where /proc does not say. */
export function readOpenFilesLimit(limitsPath = "/proc/self/limits"): OpenFilesLimit | undefined {
  try {
    return parseOpenFilesLimit(readFileSync(limitsPath, "utf8"));
  } catch {
    return undefined;
  }
}

export function fdsNeeded(maxOpenStreams: number): number {
  return maxOpenStreams * FDS_PER_STREAM + FD_RESERVE;
}

interface OpenFilesVerdict {
  level: "info" | "warn";
  msg: string;
  /** soft and hard: null when unknown. */
  fields: { soft: number | "unlimited" | null; hard: number | "unlimited" | null; needed: number; maxOpenStreams: number };
}

/** What to log at start: the limit, and a warning with the remedy when it cannot hold max_open_streams. */
export function openFilesVerdict(limit: OpenFilesLimit | undefined, maxOpenStreams: number): OpenFilesVerdict {
  const needed = fdsNeeded(maxOpenStreams);
  const shown = (n: number): number | "unlimited" => (Number.isFinite(n) ? n : "unlimited");
  const fields: OpenFilesVerdict["fields"] = { soft: limit ? shown(limit.soft) : null, hard: limit ? shown(limit.hard) : null, needed, maxOpenStreams };
  if (!limit) return { level: "info", msg: "open files limit unknown (no /proc/self/limits)", fields };
  if (limit.hard < needed) {
    return {
      level: "warn",
      msg:
        `open files: the hard limit ${limit.hard} cannot hold max_open_streams ${maxOpenStreams} ` +
        `(${FDS_PER_STREAM} sockets each + ${FD_RESERVE} = ${needed}); raise LimitNOFILE= in the systemd unit, or the hard limit as root (ulimit -Hn), or lower max_open_streams`,
      fields,
    };
  }
  if (limit.soft < needed) {
    return {
      level: "warn",
      msg: `open files: the soft limit ${limit.soft} is below the ${needed} max_open_streams ${maxOpenStreams} needs; start llmgw through bin/llmgw, which raises it to the hard limit (${limit.hard})`,
      fields,
    };
  }
  return { level: "info", msg: "open files limit", fields };
}

/** The streams `limit`'s hard limit holds (two sockets each, after the reserve), at most `cap`, at least 1; `cap` when the limit is unknown or unlimited. */
export function streamsTheLimitHolds(limit: OpenFilesLimit | undefined, cap: number): number {
  if (!limit || !Number.isFinite(limit.hard)) return cap;
  return Math.max(1, Math.min(cap, Math.floor((limit.hard - FD_RESERVE) / FDS_PER_STREAM)));
}

/**
 * What to log at start, and the figure the gateway is sized for. A
 * max_open_streams the operator set is checked against the limit (a warning
 * when the limit cannot hold it); one left unset is sized to what the hard
 * limit holds, at most `defaultStreams`, so a default start does not warn
 * about a figure nobody chose. The soft-limit warning stays in both cases:
 * it means the process was started without the launcher that raises it.
 */
export function openFilesAtStart(
  limit: OpenFilesLimit | undefined,
  configured: number | undefined,
  defaultStreams: number,
): OpenFilesVerdict & { maxOpenStreams: number } {
  if (configured !== undefined) return { ...openFilesVerdict(limit, configured), maxOpenStreams: configured };
  const sized = streamsTheLimitHolds(limit, defaultStreams);
  const verdict = openFilesVerdict(limit, sized);
  const msg =
    verdict.level === "info" && sized < defaultStreams && limit
      ? `open files limit: max_open_streams not set, sized to ${sized} (what the hard limit ${limit.hard} holds; the default is ${defaultStreams})`
      : verdict.msg;
  return { ...verdict, msg, maxOpenStreams: sized };
}
