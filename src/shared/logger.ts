/**
 * pino logger: JSON lines to stdout through an async in-process destination
 * (no transport threads: they cost a worker per process and break inside a
 * compiled binary). Lines are buffered up to BUFFER_BYTES and flushed at
 * least every FLUSH_INTERVAL_MS: one write per line cost the gateway a
 * syscall per request (~0.1 ms of CPU each, measured). "listening" lines are
 * flushed at once (launchers wait for them). Await flushLogger() before exiting.
 */
import pino from "pino";

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
export type Logger = pino.Logger;

const BUFFER_BYTES = 8 * 1024;
const FLUSH_INTERVAL_MS = 200;

/** A reader that stops reading stdout must not grow the process without bound: past this, lines are dropped. */
const MAX_BUFFERED_BYTES = 32 * 1024 * 1024;

const destination = pino.destination({ dest: 1, sync: false, minLength: BUFFER_BYTES, maxLength: MAX_BUFFERED_BYTES });
// Bounded lateness for a quiet process; unref'd so it never keeps one alive.
// The periodic flush writes asynchronously: flushSync also fsyncs, which
// stalled the event loop for tens of ms per flush when stdout is a file.
setInterval(() => {
  try {
    destination.flush();
  } catch {
    // destroyed at exit; flushLogger() already wrote what there was
  }
}, FLUSH_INTERVAL_MS).unref();

let root: Logger = pino({ level: process.env.LLMGW_LOG_LEVEL ?? "info", base: { pid: process.pid } }, destination);

export function logger(): Logger {
  return root;
}

export function setLogLevel(level: LogLevel): void {
  root.level = level;
}

/** Replace the root logger's base fields (e.g. role: "serve"). */
export function initLogger(opts: { level?: LogLevel; role: string }): Logger {
  root = pino(
    { level: opts.level ?? (process.env.LLMGW_LOG_LEVEL as LogLevel | undefined) ?? "info", base: { pid: process.pid, role: opts.role } },
    destination,
  );
  return root;
}

/** Bytes the destination holds that are not written yet (sonic-boom's own count; it has no accessor). */
function unwrittenBytes(): number {
  return (destination as unknown as { _len?: number })._len ?? 0;
}

/** One asynchronous flush: resolves on sonic-boom's drain, or at `deadline`. */
function flushOnce(deadline: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
    const done = () => {
      clearTimeout(timer);
      resolve();
    };
    try {
      destination.flush(done);
    } catch {
      done(); // destroyed
    }
  });
}

/**
 * Before exiting: write out what is buffered, asynchronously, for at most
 * `timeoutMs`. Never a synchronous write: when stdout is a pipe whose reader
 * stopped reading, a blocking write never returns, and a gateway stuck in
 * one at SIGTERM never exits (seen). So pino's own exit hook (a synchronous
 * flush and fsync) is disarmed first; what is still unwritten at the
 * deadline is lost, the exit is not. sonic-boom reports a drain with up to
 * BUFFER_BYTES still held, hence the loop.
 */
export async function flushLogger(timeoutMs = 1000): Promise<void> {
  destination.flushSync = () => {};
  const deadline = Date.now() + timeoutMs;
  let left = unwrittenBytes();
  while (left > 0 && Date.now() < deadline) {
    await flushOnce(deadline);
    const now = unwrittenBytes();
    if (now >= left) await Bun.sleep(10); // no progress (a write still under way): do not spin
    left = now;
  }
}

/** Log that a listener is up (launchers and tests wait for this line) and start writing it out now. */
export function logListening(log: Logger, name: string, url: string): void {
  log.info({ name, url }, "listening");
  try {
    destination.flush(); // asynchronous, off the event loop (behind a write already under way, if any)
  } catch {
    // destroyed: the process is exiting
  }
}

const LEVEL_INFO = 30;

/**
 * One info line of a flat, plain-data record (numbers, strings, booleans,
 * null, arrays and objects of them), written as pino writes it — level,
 * time, the logger's bindings (pid, role, a child's fields), the record's
 * fields, msg — to the logger's own stream. The request path writes one
 * audit line per request: pino's general path (hooks, serializers, tracing
 * channels, a field-by-field stringify) cost ~8 % of the main thread's CPU
 * per request, one JSON.stringify of the record costs a fraction of that.
 */
export function infoRecord(log: Pick<Logger, "info" | "isLevelEnabled">, record: object, msg: string): void {
  if (!log.isLevelEnabled("info")) return;
  const stream = (log as unknown as Record<symbol, { write(line: string): unknown } | undefined>)[pino.symbols.streamSym];
  // Not a logger of this module's pino (another copy's symbols): its own path.
  if (stream === undefined) return void log.info(record, msg);
  const fields = JSON.stringify(record);
  const bindings = (log as unknown as Record<symbol, string | undefined>)[pino.symbols.chindingsSym] ?? "";
  stream.write(`{"level":${LEVEL_INFO},"time":${Date.now()}${bindings}${fields.length > 2 ? `,${fields.slice(1, -1)}` : ""},"msg":${JSON.stringify(msg)}}\n`);
}
