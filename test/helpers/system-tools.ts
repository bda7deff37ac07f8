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

/**
 * Debian's /usr/bin/python3 when it can import every module (python3-zmq
 * provides `zmq`, python3-msgpack `msgpack`), else null. The `python3` on
 * PATH may be another interpreter without Debian's packages, so this one is
 * named by path.
 */
export function systemPythonWith(modules: readonly string[]): string | null {
  const python = "/usr/bin/python3";
  const probe = Bun.spawnSync([python, "-c", modules.map((m) => `import ${m}`).join("; ")], { stdout: "ignore", stderr: "ignore" });
  return probe.success ? python : null;
}

/** Like `testWithTool`, for a test that needs Debian's python3 with some modules: `packages` maps each module to its Debian package. */
export function testWithSystemPython(
  packages: Readonly<Record<string, string>>,
  name: string,
  fn: (python: string) => Promise<void> | void,
  timeoutMs?: number,
): void {
  let python: string | null = null;
  try {
    python = systemPythonWith(Object.keys(packages));
  } catch {
    // No /usr/bin/python3 at all: the same as missing packages.
  }
  if (python) {
    const found = python;
    test(name, () => fn(found), timeoutMs);
  } else missingToolsTest(name, Object.values(packages));
}
