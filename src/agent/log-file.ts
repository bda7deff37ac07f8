/**
 * Per-replica log file: the engine's stdout and stderr both go to one file
 * opened O_APPEND, so the engine keeps writing when the agent restarts (a
 * pipe would break with the agent) and the agent reads the tail back. The
 * file is cut back to its tail when it outgrows a cap, so disk stays bounded.
 */
import { closeSync, fstatSync, ftruncateSync, openSync, readSync, statSync, writeSync } from "node:fs";

export const DEFAULT_LOG_MAX_BYTES = 8 * 1024 * 1024;
export const DEFAULT_TAIL_BYTES = 16 * 1024;
export const DEFAULT_TAIL_LINES = 50;

/** Open for appending (created if needed; emptied when `truncate`). The caller closes the fd after the spawn. */
export function openLogForAppend(path: string, truncate: boolean): number {
  return openSync(path, truncate ? "w" : "a");
}

export function appendLine(path: string, line: string): void {
  const fd = openSync(path, "a");
  try {
    writeSync(fd, `${line}\n`);
  } finally {
    closeSync(fd);
  }
}

function readLastBytes(fd: number, maxBytes: number): Buffer {
  const size = fstatSync(fd).size;
  const len = Math.min(size, maxBytes);
  const buf = Buffer.alloc(len);
  if (len > 0) readSync(fd, buf, 0, len, size - len);
  return buf;
}

/** The last `maxLines` lines within the last `maxBytes` bytes; [] when there is no file. */
export function readTail(path: string, maxBytes = DEFAULT_TAIL_BYTES, maxLines = DEFAULT_TAIL_LINES): string[] {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return [];
  }
  try {
    const buf = readLastBytes(fd, maxBytes);
    let text = buf.toString("utf8");
    // A cut in the middle of a line leaves a fragment: drop it unless it is all we have.
    if (buf.length === maxBytes) {
      const nl = text.indexOf("\n");
      if (nl >= 0 && nl < text.length - 1) text = text.slice(nl + 1);
    }
    const lines = text.split("\n");
    if (lines[lines.length - 1] === "") lines.pop();
    return lines.slice(-maxLines);
  } finally {
    closeSync(fd);
  }
}

/** When the file is above `maxBytes`, keep only its last `keepBytes` (the writer appends, so it continues at the new end). */
export function capLogFile(path: string, maxBytes = DEFAULT_LOG_MAX_BYTES, keepBytes = DEFAULT_TAIL_BYTES * 4): void {
  try {
    if (statSync(path).size <= maxBytes) return;
  } catch {
    return;
  }
  const fd = openSync(path, "r+");
  try {
    const tail = readLastBytes(fd, keepBytes);
    ftruncateSync(fd, 0);
    writeSync(fd, "[llmgw agent: log cut to its tail]\n");
    writeSync(fd, tail);
  } finally {
    closeSync(fd);
  }
}
