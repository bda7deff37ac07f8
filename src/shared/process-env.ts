/**
 * The environment every llmgw process must start with. Bun reads these at
 * process start only, so the launcher (bin/bun-env) sets them before Bun
 * starts, and `src/cli.ts` started some other way re-executes itself with
 * them (execve: same pid, so a supervisor still sees the serving process).
 */
import { execve } from "./libc.ts";

/** Outbound fetches in flight per process; Bun's default of 256 silently queues the rest. bin/bun-env sets the same value. */
export const MAX_HTTP_REQUESTS = "16384";

const REQUIRED_BUN_ENV: Readonly<Record<string, string>> = Object.freeze({
  BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP_REQUESTS,
});

/** The variables of REQUIRED_BUN_ENV that this process did not start with. */
export function missingBunEnv(env: Record<string, string | undefined> = process.env): string[] {
  return Object.keys(REQUIRED_BUN_ENV).filter((k) => env[k] === undefined);
}

/** `process.env` plus REQUIRED_BUN_ENV, for spawning child llmgw processes. */
export function childEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  for (const [k, v] of Object.entries(REQUIRED_BUN_ENV)) env[k] ??= v;
  return Object.assign(env, extra);
}

/**
 * Replace this process with itself under childEnv(): same pid, same
 * arguments. Returns only when exec is impossible here (no glibc); the
 * caller then runs a child instead.
 */
export function execSelfWithBunEnv(): boolean {
  const argv = [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
  return execve(process.execPath, argv, childEnv());
}
