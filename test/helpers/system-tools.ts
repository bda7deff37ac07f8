/**
 * Tests that need a system package (promtool, chromium…) run when the tool is
 * installed and are skipped otherwise, except under
 * LLMGW_REQUIRE_SYSTEM_TESTS=1 (set by .ci/run), where a missing tool fails.
 */
import { test } from "bun:test";

export function findTool(name: string): string | null {
  return Bun.which(name);
}

/** The stand-in for a test whose tools are missing: a failing test under LLMGW_REQUIRE_SYSTEM_TESTS=1, a skipped one otherwise. */
export function missingToolsTest(name: string, missing: readonly string[]): void {
  const list = missing.map((t) => `'${t}'`).join(", ");
  if (process.env.LLMGW_REQUIRE_SYSTEM_TESTS === "1") {
    test(name, () => {
      throw new Error(`${list} required (LLMGW_REQUIRE_SYSTEM_TESTS=1) but not on PATH`);
    });
  } else {
    test.skip(`${name} (skipped: ${list} not installed)`, () => {});
  }
}

/** Like `test`, but only when `tool` is on PATH (or fail under LLMGW_REQUIRE_SYSTEM_TESTS=1). */
export function testWithTool(tool: string, name: string, fn: (toolPath: string) => Promise<void> | void, timeoutMs?: number): void {
  const path = findTool(tool);
  if (path) test(name, () => fn(path), timeoutMs);
  else missingToolsTest(name, [tool]);
}

/** Like `testWithTool`, for a test that needs several tools (paths in the same order). */
export function testWithTools<const T extends readonly string[]>(
  tools: T,
  name: string,
  fn: (toolPaths: { [K in keyof T]: string }) => Promise<void> | void,
  timeoutMs?: number,
): void {
  const paths = tools.map((t) => findTool(t));
  const missing = tools.filter((_, i) => !paths[i]);
  // Every entry is a path when none is missing, in the order of `tools`.
  if (missing.length === 0) test(name, () => fn(paths as unknown as { [K in keyof T]: string }), timeoutMs);
  else missingToolsTest(name, missing);
}

/** A tool's path for a check inside a larger test: null (check skipped) when absent, an error under LLMGW_REQUIRE_SYSTEM_TESTS=1. */
export function optionalTool(name: string): string | null {
  const path = findTool(name);
  if (!path && process.env.LLMGW_REQUIRE_SYSTEM_TESTS === "1") throw new Error(`'${name}' is required (LLMGW_REQUIRE_SYSTEM_TESTS=1) but not on PATH`);
  return path;
}

/** Run a tool to completion; its exit code and stdout + stderr together. */
export async function runTool(bin: string, args: readonly string[], stdin?: string): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([bin, ...args], { stdin: stdin === undefined ? "ignore" : new TextEncoder().encode(stdin), stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}
