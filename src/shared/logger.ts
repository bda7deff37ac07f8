/**
 * pino logger: JSON lines to stdout through an async in-process destination
 * (no transport threads: they cost a worker per process and break inside a
 * compiled binary). Call flushLogger() before exiting.
 */
import pino from "pino";

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error" | "fatal" | "silent";
export type Logger = pino.Logger;

const destination = pino.destination({ dest: 1, sync: false, minLength: 0 });

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

export function flushLogger(): void {
  try {
    destination.flushSync();
  } catch {
    // the destination may not be ready yet (nothing was written); nothing to flush
  }
}
