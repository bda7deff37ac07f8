/**
 * Scenario: an operator's config with a bad value, a misspelt nested key and
 * a cross-field mistake; `llmgw serve --check-config` names all three in one
 * run (the misspelt key with the key it meant) and exits non-zero.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "llmgw-check-config-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

test("serve --check-config prints every error with its key path and exits 1", async () => {
  const file = join(tmp, "llmgw.yaml");
  writeFileSync(
    file,
    [
      'listen: "127.0.0.1:99999"',
      "health:",
      "  poll_intervl_ms: 500",
      "admission:",
      "  default_band: gold",
      "endpoints:",
      '  - { id: a, url: "http://127.0.0.1:1" }',
      "",
    ].join("\n"),
  );
  const proc = Bun.spawn([process.execPath, CLI, "serve", "--config", file, "--check-config"], {
    cwd: REPO_ROOT,
    env: childEnv({ NO_COLOR: "1" }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect(code).toBe(1);
  expect(stdout).toBe("");
  expect(stderr.trim().split("\n")).toEqual([
    `invalid configuration (${file}):`,
    "  listen: expected a port of at most 65535",
    "  health.poll_intervl_ms: unknown key (did you mean 'poll_interval_ms'?)",
    "  admission.default_band: unknown band 'gold' (expected one of interactive, standard, batch)",
  ]);
}, 30_000);
