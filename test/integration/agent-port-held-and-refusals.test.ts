/**
 * Scenario: ports someone else holds. A second agent on an earlier agent's
 * port says which pid holds it and how to stop it; on a port another program
 * holds, it names that program. A replica whose port is held is refused at
 * PUT (400 port-in-use naming the port), and one whose port is taken while
 * it waits to restart is not started, says why, and comes back once the port
 * is free. Specs that would turn a model name or an extra argument into an
 * agent-owned flag are refused through the API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../src/agent/agent-service.ts";
import { isAlive } from "../../src/agent/proc-info.ts";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT, type Started, startLlmgw, stopAll, waitUntil } from "../helpers/processes.ts";

const TOKEN = "port-test-token";
const tmp = mkdtempSync(join(tmpdir(), "agent-ports-"));
let agent: Started;

function agentArgs(listen: string, stateDir: string): string[] {
  return [
    "agent",
    "--listen",
    listen,
    "--token",
    TOKEN,
    "--state-dir",
    join(tmp, stateDir),
    "--nvidia-smi",
    join(tmp, "none"),
    "--sysfs-root",
    join(tmp, "none"),
    "--max-restarts",
    "5",
  ];
}

/** Run an agent expected to refuse to start; its exit code and everything it printed. */
async function failedAgent(args: string[]): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn([process.execPath, CLI, ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}

function hold(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(port, "127.0.0.1", () => resolve(srv));
  });
}

function call(path: string, init: RequestInit = {}): Promise<Response> {
  return fetch(`${agent.url}${path}`, { ...init, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" } });
}

async function replica(id: string): Promise<{ state: string; pid: number | null; message: string | null; port: number }> {
  return (await (await call(`/v1/replicas/${id}`)).json()) as { state: string; pid: number | null; message: string | null; port: number };
}

beforeAll(async () => {
  agent = await startLlmgw(agentArgs("127.0.0.1:0", "a"));
});

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

describe("agent and held ports", () => {
  test("a second agent on the first one's port names the earlier agent's pid and how to stop it", async () => {
    const port = Number(new URL(agent.url).port);
    const { code, out } = await failedAgent(agentArgs(`127.0.0.1:${port}`, "b"));
    expect(code).toBe(1);
    expect(out).toContain(`port ${port} is held by an earlier llmgw agent, pid ${agent.proc.pid} (`);
    expect(out).toContain(`Stop it first (kill ${agent.proc.pid}; under systemd: systemctl stop llmgw-agent)`);
    expect(out).not.toContain("EADDRINUSE");
  }, 30_000);

  test("a port another program holds is named with that program's pid", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const srv = await hold(port);
    try {
      const { code, out } = await failedAgent(agentArgs(`127.0.0.1:${port}`, "c"));
      expect(code).toBe(1);
      expect(out).toContain(`port ${port} is held by another process, pid ${process.pid} (`);
    } finally {
      srv.close();
    }
  }, 30_000);

  test("a replica on a held port is refused at PUT with the port and the holder", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const srv = await hold(port);
    try {
      const res = await call("/v1/replicas/held", { method: "PUT", body: JSON.stringify({ engine: "sim", model: "m", port }) });
      expect(res.status).toBe(400);
      const body = (await res.json()) as { error: { code: string; message: string; param: string } };
      expect(body.error).toMatchObject({ code: "VALIDATION_FAILED", param: "port" });
      expect(body.error.message).toStartWith(`port-in-use: port ${port} is held by another process, pid ${process.pid}`);
      expect((await call("/v1/replicas/held")).status).toBe(404);
    } finally {
      srv.close();
    }
  }, 30_000);

  test("a crashed replica whose port was taken meanwhile is not started until the port is free again", async () => {
    const port = await freePort("127.0.0.1", new Set());
    expect((await call("/v1/replicas/r1", { method: "PUT", body: JSON.stringify({ engine: "sim", model: "m", port }) })).status).toBe(201);
    const first = await waitUntil(
      async () => {
        const r = await replica("r1");
        return r.state === "Ready" ? r : null;
      },
      { timeoutMs: 15_000, what: "r1 Ready" },
    );
    if (!first?.pid) throw new Error("no engine pid");
    process.kill(first.pid, "SIGKILL");
    await waitUntil(() => !isAlive(first.pid!), { what: "engine gone" });
    // Grab the port before the restart (the first one waits 1 s).
    const srv = await waitUntil(() => hold(port).catch(() => null), { timeoutMs: 2_000, what: "port taken" });
    if (!srv) throw new Error("could not take the port");
    const blocked = await waitUntil(
      async () => {
        const r = await replica("r1");
        return r.message?.includes("engine not started") ? r : null;
      },
      { timeoutMs: 10_000, what: "restart held back" },
    );
    expect(blocked).toMatchObject({ state: "Failed", pid: null });
    expect(blocked?.message).toStartWith(`port ${port} is held by another process, pid ${process.pid}`);
    srv.close();
    const back = await waitUntil(
      async () => {
        const r = await replica("r1");
        return r.state === "Ready" ? r : null;
      },
      { timeoutMs: 20_000, what: "r1 Ready again" },
    );
    expect(back?.pid).not.toBe(first.pid);
    expect((await call("/v1/replicas/r1", { method: "DELETE" })).status).toBe(200);
  }, 60_000);

  test("a model named like a flag, or extra args that set the agent's flags, are refused", async () => {
    const cases: [unknown, string][] = [
      [{ engine: "sim", model: "--port" }, "model-name: model '--port' starts with '-'"],
      [{ engine: "sim", model: "m", extraArgs: ["--port", "1"] }, "engine-args: extraArgs[0] '--port' sets --port"],
      [{ engine: "sim", model: "m", env: { LLMGW_PARENT_PID: "1" } }, "engine-env: env LLMGW_PARENT_PID is set by the agent"],
    ];
    for (const [spec, message] of cases) {
      const res = await call("/v1/replicas/bad", { method: "PUT", body: JSON.stringify(spec) });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toStartWith(message);
    }
  }, 30_000);
});
