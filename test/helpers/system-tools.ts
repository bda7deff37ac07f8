/**
 * Tests that need a system package (promtool, chromium…) run when the tool is
 * installed and are skipped otherwise, except under
 * LLMGW_REQUIRE_SYSTEM_TESTS=1 (set by .ci/run), where a missing tool fails.
 */
import { test } from "bun:test";

export function findTool(name: string): string | null {
  return Bun.which(name);
}

/** Like `test`, but only when `tool` is on PATH (or fail under LLMGW_REQUIRE_SYSTEM_TESTS=1). */
export function testWithTool(tool: string, name: string, fn: (toolPath: string) => Promise<void> | void, timeoutMs?: number): void {
  const path = findTool(tool);
  if (path) {
    test(name, () => fn(path), timeoutMs);
  } else if (process.env.LLMGW_REQUIRE_SYSTEM_TESTS === "1") {
    test(name, () => {
      throw new Error(`'${tool}' is required (LLMGW_REQUIRE_SYSTEM_TESTS=1) but not on PATH`);
    });
  } else {
    test.skip(`${name} (skipped: '${tool}' not installed)`, () => {});
  }
}
