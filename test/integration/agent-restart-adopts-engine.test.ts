/**
 * Scenario: an agent run with --keep-engines-on-exit launches a (fake) vLLM
 * through its API, is stopped (its engine keeps running), and a new agent over the same state
 * directory adopts the still-running engine instead of starting another.
 * The engine got the argv and CUDA_VISIBLE_DEVICES the adapter built.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { groupMembers, isAlive } from "../../src/agent/proc-info.ts";
import { capturedGpuRows } from "../fixtures/agent/captures.ts";
import { writeFakeNvidiaSmi } from "../fixtures/agent/fake-tools.ts";
import { sharedFixture } from "../helpers/fixtures.ts";
import { type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const TOKEN = "t0k3n";
const FAKE_VLLM = join(import.meta.dir, "..", "fixtures", "agent", "fake-vllm.sh");
const tmp = mkdtempSync(join(tmpdir(), "agent-restart-"));
let args: string[] = [];
let gpus: Record<string, string>[] = [];
let enginePid = 0;

beforeAll(() => {
  const h200 = capturedGpuRows(sharedFixture("nvidia-smi-capture__linux-x86_64__nvidia-h200__590.48.01.txt"), "idle")[0]!;
  gpus = [0, 1, 2, 3].map((i) => ({ ...h200, index: String(i), uuid: `GPU-0000000${i}-0000-0000-0000-000000000000` }));
  const nvidiaSmi = writeFakeNvidiaSmi(join(tmp, "bin"), { gpus, apps: [] });
  args = [
    "agent",
    "--listen",
    "127.0.0.1:0",
    "--token",
    TOKEN,
    "--state-dir",
    join(tmp, "state"),
    "--nvidia-smi",
    nvidiaSmi,
    "--sysfs-root",
    join(tmp, "none"),
    "--vllm",
    FAKE_VLLM,
    "--keep-engines-on-exit",
  ];
});

afterAll(async () => {
  await stopAll();
  if (enginePid > 0 && groupMembers(enginePid).length > 0) process.kill(-enginePid, "SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

async function state(agent: Started): Promise<{ replicas: { id: string; pid: number | null; adopted: boolean; state: string }[] }> {
  const res = await fetch(`${agent.url}/v1/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.json()) as { replicas: { id: string; pid: number | null; adopted: boolean; state: string }[] };
}

describe("agent restart", () => {
  test("the engine outlives the agent and the next agent adopts it", async () => {
    const first = await startLlmgw(args);
    const res = await fetch(`${first.url}/v1/replicas/big`, {
      method: "PUT",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ engine: "vllm", model: "meta-llama/Llama-3.1-70B", gpus: [2, 3], tensorParallel: 2, port: 18123 }),
    });
    expect(res.status).toBe(201);
    enginePid = (await state(first)).replicas[0]?.pid ?? 0;
    expect(enginePid).toBeGreaterThan(0);
    const log = join(tmp, "state", "big.log");
    await waitUntil(() => readFileSync(log, "utf8").includes("fake-vllm env"), { what: "engine output" });
    const text = readFileSync(log, "utf8");
    expect(text).toContain("fake-vllm argv: serve meta-llama/Llama-3.1-70B --host 127.0.0.1 --port 18123 --tensor-parallel-size 2 --pipeline-parallel-size 1");
    expect(text).toContain("CUDA_VISIBLE_DEVICES=2,3");

    expect(await first.stop("SIGTERM")).toBe(0);
    expect(isAlive(enginePid)).toBe(true); // not stopped with the agent

    const second = await startLlmgw(args);
    const replicas = (await state(second)).replicas;
    expect(replicas).toHaveLength(1);
    expect(replicas[0]).toMatchObject({ id: "big", pid: enginePid, adopted: true });
    expect(["Starting", "Loading"]).toContain(replicas[0]!.state);

    // GPU processes: the adopted engine's pid is ours, the test runner's is not.
    writeFileSync(
      join(tmp, "bin", "nvidia-smi-data.json"),
      JSON.stringify({
        gpus,
        apps: [
          { gpu_uuid: gpus[2]!.uuid!, pid: String(enginePid), used_memory: "70000" },
          { gpu_uuid: gpus[3]!.uuid!, pid: String(process.pid), used_memory: "512" },
        ],
      }),
    );
    const health = await waitUntil(
      async () => {
        const res = await fetch(`${second.url}/v1/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
        const body = (await res.json()) as { gpus: { index: number; health: { reasons: string[]; foreignProcesses: { pid: number }[] | null } }[] };
        return body.gpus[3]?.health.reasons.length ? body.gpus : null;
      },
      { what: "foreign process flagged" },
    );
    expect(health?.[2]?.health).toMatchObject({ reasons: [], foreignProcesses: [] });
    expect(health?.[3]?.health).toMatchObject({ reasons: ["foreign_process"], foreignProcesses: [{ pid: process.pid }] });

    const del = await fetch(`${second.url}/v1/replicas/big`, { method: "DELETE", headers: { authorization: `Bearer ${TOKEN}` } });
    expect(del.status).toBe(200);
    expect(groupMembers(enginePid)).toEqual([]);
  }, 60_000);
});
