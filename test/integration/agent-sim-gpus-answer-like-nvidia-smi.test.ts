/**
 * Scenario: `llmgw agent --sim-gpus N` on a machine without GPUs reports N
 * simulated H100s through its own discovery (the stand-in nvidia-smi it
 * writes under --state-dir), with UUIDs that differ between two nodes; it
 * refuses --sim-gpus beside --nvidia-smi, and a count out of range.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT, startLlmgw, stopAll } from "../helpers/processes.ts";

const tmp = mkdtempSync(join(tmpdir(), "agent-sim-gpus-"));
const TOKEN = "sim-gpus-agent-token";

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

async function inventory(url: string): Promise<{ gpus: { index: number; uuid: string; class: string; health: { ok: boolean } }[] }> {
  return (await (await fetch(`${url}/v1/inventory`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as never;
}

test("two agents with --sim-gpus: N healthy h100-80g GPUs each, distinct UUIDs; bad combinations are usage errors", async () => {
  const start = (name: string, n: number) =>
    startLlmgw(
      ["agent", "--listen", "127.0.0.1:0", "--token", TOKEN, "--state-dir", join(tmp, name), "--sim-gpus", String(n), "--sysfs-root", join(tmp, "none")],
      { timeoutMs: 20_000 },
    );
  const [a, b] = await Promise.all([start("a", 3), start("b", 2)]);
  const [ia, ib] = await Promise.all([inventory(a.urls.agent!), inventory(b.urls.agent!)]);
  expect(ia.gpus.map((g) => [g.index, g.class, g.health.ok])).toEqual([
    [0, "h100-80g", true],
    [1, "h100-80g", true],
    [2, "h100-80g", true],
  ]);
  expect(ib.gpus).toHaveLength(2);
  const uuids = [...ia.gpus, ...ib.gpus].map((g) => g.uuid);
  expect(new Set(uuids).size).toBe(5);

  for (const [args, message] of [
    [["--sim-gpus", "2", "--nvidia-smi", "/usr/bin/nvidia-smi"], "--sim-gpus and --nvidia-smi exclude each other: the simulated GPUs answer as nvidia-smi"],
    [["--sim-gpus", "11"], "--sim-gpus: expected an integer in [1, 10], got '11'"],
  ] as const) {
    const proc = Bun.spawn([process.execPath, CLI, "agent", "--token", TOKEN, "--state-dir", join(tmp, "bad"), ...args], {
      cwd: REPO_ROOT,
      env: childEnv(),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    expect({ args, code, first: stderr.split("\n")[0] }).toEqual({ args, code: 2, first: `llmgw agent: ${message}` });
  }
}, 60_000);
