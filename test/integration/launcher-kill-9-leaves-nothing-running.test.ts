/**
 * Scenario: systemd (or the OOM killer) sends SIGKILL to the process it
 * supervises — the one the launcher started as. For `serve` and for `agent`
 * (with a sim-engine replica running) nothing keeps running afterwards, and
 * a restart comes up on the same port. Through bin/llmgw that process *is*
 * Bun (exec); through `node bin/llmgw.mjs` Bun is a child the kernel stops
 * with its parent. The launcher leaves the soft open-files limit at the hard
 * one, and the gateway logs it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../src/agent/agent-service.ts";
import { groupMembers, isAlive, readStat } from "../../src/agent/proc-info.ts";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { parseOpenFilesLimit } from "../../src/shared/open-files-limit.ts";
import { findPortHolder } from "../../src/shared/port-holder.ts";
import { REPO_ROOT, type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const SH_LAUNCHER = ["/bin/sh", join(REPO_ROOT, "bin", "llmgw")];
const NODE_LAUNCHER = ["node", join(REPO_ROOT, "bin", "llmgw.mjs")];
/** What a shell with a low default gives its children; the launcher must lift it. */
const LOW_SOFT_LIMIT = 1024;
const TOKEN = "kill-9-token";
const tmp = mkdtempSync(join(tmpdir(), "launcher-kill-9-"));
let engine: Started;
/** Engines the agent test saw: killed in afterAll should the test fail before they are gone. */
const enginePids: number[] = [];

beforeAll(async () => {
  engine = await startLlmgw(["sim-engine", "--model", "m", "--port", "0", "--itl-ms", "1"]);
});

afterAll(async () => {
  await stopAll();
  for (const pid of enginePids) if (groupMembers(pid).length > 0) process.kill(-pid, "SIGKILL");
  rmSync(tmp, { recursive: true, force: true });
});

/** SIGKILL the launched process, then wait until it is reaped and nothing is left in its process group. */
async function killAndWaitGone(child: Started): Promise<void> {
  process.kill(child.proc.pid, "SIGKILL");
  // Reaped, not just a zombie leader: other threads may still hold its sockets until then.
  await child.proc.exited;
  await waitUntil(() => groupMembers(child.proc.pid).length === 0, { timeoutMs: 8_000, what: `process group ${child.proc.pid} empty` });
}

function openFiles(pid: number): { soft: number; hard: number } | undefined {
  return parseOpenFilesLimit(readFileSync(`/proc/${pid}/limits`, "utf8"));
}

const bunBinary = realpathSync(join(REPO_ROOT, "node_modules", "bun", "bin", "bun.exe"));

describe("kill -9 of the supervised process", () => {
  test("serve through bin/llmgw: the launched pid is Bun serving the port; after SIGKILL nothing is left and a restart binds the same port", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const config = writeGatewayConfig({ listen: `127.0.0.1:${port}`, endpoints: [{ id: "e1", url: engine.url }], max_open_streams: 1 });
    // A shell with a low soft limit starts the launcher, as a login shell or a bare unit would.
    const lowered = ["/bin/sh", "-c", `ulimit -S -n ${LOW_SOFT_LIMIT} && exec "$0" "$@"`, ...SH_LAUNCHER];
    const gw = await startLlmgw(["serve", "--config", config], { launcher: lowered, waitFor: 2 });
    const pid = gw.proc.pid;
    expect(realpathSync(readlinkSync(`/proc/${pid}/exe`))).toBe(bunBinary);
    expect(findPortHolder(port)).toMatchObject({ pid });

    const limit = openFiles(pid);
    expect(limit).toBeDefined();
    expect(limit!.hard).toBeGreaterThan(LOW_SOFT_LIMIT);
    expect(limit!.soft).toBe(limit!.hard);
    const logged = gw
      .output()
      .split("\n")
      .find((l) => l.includes('"msg":"open files limit"'));
    expect(logged).toBeDefined();
    expect(JSON.parse(logged!)).toMatchObject({ soft: limit!.soft, hard: limit!.hard, needed: 258, maxOpenStreams: 1 });

    await killAndWaitGone(gw);
    expect(findPortHolder(port)).toBeNull();
    // Sized beyond the hard limit this time: the restart says so.
    const big = writeGatewayConfig({ listen: `127.0.0.1:${port}`, endpoints: [{ id: "e1", url: engine.url }], max_open_streams: limit!.hard });
    const again = await startLlmgw(["serve", "--config", big], { launcher: SH_LAUNCHER, waitFor: 2 });
    expect(again.urls.api).toBe(`http://127.0.0.1:${port}`);
    expect((await fetch(`${again.urls.api}/health`)).status).toBe(200);
    expect(again.output()).toContain(`"msg":"open files: the hard limit ${limit!.hard} cannot hold max_open_streams ${limit!.hard}`);
    await again.stop();
  }, 60_000);

  test("serve through node bin/llmgw.mjs: Bun is the launcher's child and dies with it", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const config = writeGatewayConfig({ listen: `127.0.0.1:${port}`, endpoints: [{ id: "e1", url: engine.url }] });
    const gw = await startLlmgw(["serve", "--config", config], { launcher: NODE_LAUNCHER, waitFor: 2 });
    const holder = findPortHolder(port);
    if (holder === null || holder === "unknown") throw new Error("the gateway's port has no visible holder");
    expect(holder.pid).not.toBe(gw.proc.pid);
    expect(readStat(holder.pid)?.ppid).toBe(gw.proc.pid);

    process.kill(gw.proc.pid, "SIGKILL"); // the Node launcher only
    await waitUntil(() => !isAlive(holder.pid), { timeoutMs: 8_000, what: "the orphaned Bun child gone" });
    await waitUntil(() => findPortHolder(port) === null, { timeoutMs: 2_000, what: "port released" });
    const again = await startLlmgw(["serve", "--config", config], { launcher: NODE_LAUNCHER, waitFor: 2 });
    expect(again.urls.api).toBe(`http://127.0.0.1:${port}`);
    await again.stop();
  }, 60_000);

  test("agent through bin/llmgw with a sim-engine replica: SIGKILL takes the engine down too; the restarted agent relaunches it on its port", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const args = [
      "agent",
      "--listen",
      `127.0.0.1:${port}`,
      "--token",
      TOKEN,
      "--state-dir",
      join(tmp, "state"),
      "--nvidia-smi",
      join(tmp, "no-nvidia-smi"),
      "--sysfs-root",
      join(tmp, "no-ib"),
    ];
    const agent = await startLlmgw(args, { launcher: SH_LAUNCHER });
    expect(realpathSync(readlinkSync(`/proc/${agent.proc.pid}/exe`))).toBe(bunBinary);
    const auth = { authorization: `Bearer ${TOKEN}` };
    const put = await fetch(`${agent.url}/v1/replicas/sim1`, {
      method: "PUT",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ engine: "sim", model: "m" }),
    });
    expect(put.status).toBe(201);
    const replica = async (base: string) =>
      ((await (await fetch(`${base}/v1/state`, { headers: auth })).json()) as { replicas: { state: string; pid: number | null; port: number }[] }).replicas[0];
    const ready = await waitUntil(
      async () => {
        const r = await replica(agent.url);
        return r?.state === "Ready" ? r : null;
      },
      { timeoutMs: 15_000, what: "replica Ready" },
    );
    if (!ready?.pid) throw new Error("no engine pid");
    const enginePid = ready.pid;
    enginePids.push(enginePid);
    expect(readStat(enginePid)?.ppid).toBe(agent.proc.pid);

    await killAndWaitGone(agent);
    await waitUntil(() => !isAlive(enginePid) && groupMembers(enginePid).length === 0 && findPortHolder(ready.port) === null, {
      timeoutMs: 8_000,
      what: "engine gone with its agent",
    });

    const again = await startLlmgw(args, { launcher: SH_LAUNCHER });
    expect(again.url).toBe(`http://127.0.0.1:${port}`);
    const back = await waitUntil(
      async () => {
        const r = await replica(again.url);
        return r?.state === "Ready" && r.pid !== enginePid ? r : null;
      },
      { timeoutMs: 20_000, what: "replica relaunched and Ready" },
    );
    if (!back?.pid) throw new Error("no relaunched engine pid");
    enginePids.push(back.pid);
    expect(back.port).toBe(ready.port);
    // A graceful stop takes the engine with it as well.
    expect(await again.stop("SIGTERM")).toBe(0);
    expect(isAlive(back.pid)).toBe(false);
  }, 90_000);
});
