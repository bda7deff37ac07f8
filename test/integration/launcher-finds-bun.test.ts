/**
 * Scenario: llmgw started the ways people start it. npm links bin/llmgw into
 * node_modules/.bin (a symlink, elsewhere): the launcher follows it to the
 * project. A checkout without `npm install` and no Bun on PATH gets a
 * sentence saying what to do, exit 127. bin/bun-env and
 * src/shared/process-env.ts agree on the Bun environment.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_HTTP_REQUESTS } from "../../src/shared/process-env.ts";
import { REPO_ROOT } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "launcher-finds-bun-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function run(argv: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn(argv, { cwd: tmp, env, stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

/** A PATH holding only the tools the launcher itself uses: no bun, no node. */
function barePath(): string {
  const dir = join(tmp, "bare-path");
  mkdirSync(dir, { recursive: true });
  for (const tool of ["dirname", "readlink"]) {
    const found = Bun.which(tool);
    if (!found) throw new Error(`${tool} not found`);
    symlinkSync(found, join(dir, tool));
  }
  return dir;
}

describe("the sh launcher", () => {
  test("through a symlink in another directory (npm's node_modules/.bin) it finds the project and runs the CLI", async () => {
    const link = join(tmp, "llmgw");
    symlinkSync(join(REPO_ROOT, "bin", "llmgw"), link);
    const { code, out } = await run([link, "--help"], { PATH: process.env.PATH ?? "/usr/bin:/bin" });
    expect(code).toBe(0);
    expect(out).toStartWith("usage: llmgw <command> [flags]");
  }, 30_000);

  test("without node_modules and without a bun on PATH it says to run npm install, exit 127", async () => {
    const bin = join(tmp, "fresh-checkout", "bin");
    mkdirSync(bin, { recursive: true });
    for (const f of ["llmgw", "bun-env"]) copyFileSync(join(REPO_ROOT, "bin", f), join(bin, f));
    const { code, err } = await run(["/bin/sh", join(bin, "llmgw"), "serve"], { PATH: barePath() });
    expect(code).toBe(127);
    expect(err).toBe(`llmgw: cannot start Bun (not in ${join(tmp, "fresh-checkout")}/node_modules/bun, not on PATH); run 'npm install' first\n`);
  }, 30_000);

  test("bin/bun-env sets the same BUN_CONFIG_MAX_HTTP_REQUESTS as src/shared/process-env.ts", () => {
    expect(readFileSync(join(REPO_ROOT, "bin", "bun-env"), "utf8")).toContain(`: "\${BUN_CONFIG_MAX_HTTP_REQUESTS:=${MAX_HTTP_REQUESTS}}"`);
  });
});
