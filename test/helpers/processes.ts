/**
 * Real llmgw processes for integration tests (see src/shared/llmgw-child.ts):
 * spawned on port 0 in their own process group, found ready through their
 * "listening" log lines, and killed with their whole group.
 */
import { type LlmgwChild, spawnLlmgw, stopAllChildren } from "../../src/shared/llmgw-child.ts";

export { CLI_PATH as CLI, REPO_ROOT } from "../../src/shared/llmgw-child.ts";
export type Started = LlmgwChild;

/** Start `llmgw <args>` and resolve once it has logged `waitFor` listening lines. */
export function startLlmgw(
  args: string[],
  opts: { waitFor?: number; timeoutMs?: number; env?: Record<string, string>; launcher?: string[] } = {},
): Promise<Started> {
  return spawnLlmgw(args, { ...opts, env: { LLMGW_LOG_LEVEL: process.env.LLMGW_TEST_LOG_LEVEL ?? "info", ...opts.env } });
}

/** Stop every process a test started and did not stop itself. */
export const stopAll = stopAllChildren;

/** Poll `fn` until it returns a truthy value or the time is up. */
export async function waitUntil<T>(fn: () => Promise<T> | T, opts: { timeoutMs?: number; intervalMs?: number; what?: string } = {}): Promise<NonNullable<T>> {
  const { timeoutMs = 10_000, intervalMs = 50, what = "condition" } = opts;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const v = await fn();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    await Bun.sleep(intervalMs);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ""}`);
}
