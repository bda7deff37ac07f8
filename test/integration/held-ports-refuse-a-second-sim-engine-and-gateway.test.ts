/**
 * Scenario: a port already held. Bun turns SO_REUSEPORT on by itself for a
 * server started with `development: false` (the sim-engine) and Elysia does
 * for its listeners (the admin and metrics listeners), so a second process
 * on a held port used to share it silently, and a gateway polling that port
 * flipped between the two model lists. A second sim-engine on a held port,
 * and a second gateway on a held admin port, must fail to start instead,
 * while the first keeps serving alone.
 */
import { afterAll, expect, test } from "bun:test";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { CLI, REPO_ROOT, stopAll } from "../helpers/processes.ts";

afterAll(async () => {
  await stopAll();
});

/** Run llmgw expected to exit at start by itself (killed after `limitMs` if it does not, which fails): its exit code and output. */
async function mustFailToStart(args: string[], limitMs = 15_000): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "pipe",
    stderr: "pipe",
  });
  let killed = false;
  const timer = setTimeout(() => {
    killed = true;
    proc.kill("SIGKILL");
  }, limitMs);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  if (killed) throw new Error(`llmgw ${args[0]} was still running after ${limitMs} ms (it should have refused the held port):\n${(out + err).slice(-2000)}`);
  return { code, out: out + err };
}

test("a second sim-engine on a held port fails to start; the first keeps the port and its model list", async () => {
  const first = await startSim(["--model", "first-model"]);
  const port = new URL(first.api).port;
  const second = await mustFailToStart(["sim-engine", "--port", port, "--model", "second-model"]);
  expect(second.code).not.toBe(0);
  expect(second.out).toContain(`port ${port} in use`);
  // Every connection lands on the first: with a shared port the kernel would spread them over both.
  for (let i = 0; i < 20; i++) {
    const models = (await (await fetch(`${first.api}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toEqual(["first-model"]);
  }
}, 60_000);

test("a second gateway on a held admin port fails to start", async () => {
  const sim = await startSim(["--model", "m"]);
  const endpoints = [{ id: "sim", url: sim.api }];
  const first = await startGateway({ endpoints });
  const adminPort = new URL(first.admin).port;
  const second = await mustFailToStart(["serve", "--config", writeGatewayConfig({ endpoints, admin_listen: `127.0.0.1:${adminPort}` })]);
  expect(second.code).not.toBe(0);
  expect(second.out).toMatch(new RegExp(`port ${adminPort} (in use|is held)`));
  expect((await fetch(`${first.admin}/healthz`)).status).toBe(200);
}, 60_000);
