/** Files a bench flag names (a trace, a gateway config, a policy file), read only when they are regular files of bounded size. */
import { closeSync, constants, fstatSync, openSync, readSync, type Stats } from "node:fs";
import { UsageError } from "../shared/flags.ts";

/**
 * The largest trace `bench replay --trace` reads. The largest shipped trace
 * (bench/traces/mooncake-conversation.jsonl) is 3.0 MB; 64 MiB is about 21
 * times that — room for a longer production trace — while keeping the text
 * and its parsed requests well inside a bench's memory.
 */
export const MAX_TRACE_FILE_BYTES = 64 * 1024 * 1024;

/** The largest YAML a bench reads as config (--gateway-config, a routing policy file): the shipped ones are under 1 KiB. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/** The flag was given right; what it names is wrong: one line, no usage. */
const NO_USAGE = { showUsage: false };

/** What a path that is not a regular file is, for the message. */
function kindOf(st: Stats): string {
  if (st.isDirectory()) return "a directory";
  if (st.isFIFO()) return "a FIFO";
  if (st.isCharacterDevice()) return "a character device";
  if (st.isBlockDevice()) return "a block device";
  if (st.isSocket()) return "a socket";
  return "not a regular file";
}

/**
 * The text of the regular file at `path` (links followed), at most
 * `maxBytes`; a UsageError (exit 2, one line, starting with `what`) for
 * anything else. The file is opened non-blocking and checked on its own
 * descriptor, so a FIFO is refused without waiting for a writer and a path
 * swapped after a check cannot slip through; at most its size + 1 bytes
 * (≤ maxBytes + 1) are ever read, so /dev/zero or a file still growing
 * cannot fill memory.
 */
export function readInputFile(path: string, maxBytes: number, what: string): string {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new UsageError(`${what}: cannot open ${path}: ${err instanceof Error ? err.message : String(err)}`, NO_USAGE);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new UsageError(`${what}: ${path} is ${kindOf(st)}; expected a regular file`, NO_USAGE);
    if (st.size > maxBytes) throw new UsageError(`${what}: ${path} is ${st.size} bytes; at most ${maxBytes} are read`, NO_USAGE);
    // One byte more than the size it has: a file that grows meanwhile is seen to, and never read past.
    const buf = Buffer.allocUnsafe(st.size + 1);
    let n = 0;
    while (n < buf.length) {
      const got = readSync(fd, buf, n, buf.length - n, null);
      if (got === 0) break;
      n += got;
    }
    if (n > st.size) throw new UsageError(`${what}: ${path} grew while it was read (over its ${st.size} bytes)`, NO_USAGE);
    return buf.toString("utf8", 0, n);
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${what}: cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`, NO_USAGE);
  } finally {
    closeSync(fd);
  }
}
