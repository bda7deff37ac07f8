/**
 * Scenario: an operator starts llmgw through npm — `npx llmgw serve &` or
 * `npm start` — and later signals the pid their shell gave them, which is
 * npm's. npm passes the signal to its child only; llmgw must stop with it
 * (gracefully: it logs "stopped") instead of serving on as an orphan, and the
 * demo's sim-engines go with it.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { type ChildProcess, spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { freePort } from "../../src/agent/agent-service.ts";
import { isAlive, readStat } from "../../src/agent/proc-info.ts";
import { writeGatewayConfig } from "../../src/shared/llmgw-child.ts";
import { findPortHolder } from "../../src/shared/port-holder.ts";
import { REPO_ROOT, waitUntil } from "../helpers/processes.ts";

const started: ChildProcess[] = [];
const servers: number[] = [];

afterAll(() => {
  for (const pid of servers) if (isAlive(pid)) process.kill(pid, "SIGKILL");
  for (const child of started) if (child.exitCode === null) child.kill("SIGKILL");
});

/** Start `argv` in the repository as a shell would, with its output collected. */
function launch(argv: string[]): { child: ChildProcess; output: () => string } {
  // Without the caller's npm variables: this npm must behave as one run by hand.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_") && k !== "LLMGW_PARENT_PID"));
  const child = spawn(argv[0]!, argv.slice(1), { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe"] });
  started.push(child);
  let out = "";
  child.stdout!.on("data", (b: Buffer) => (out += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (out += b.toString()));
  return { child, output: () => out };
}

/** The pid serving `port`, once something does. */
async function serverOn(port: number, output: () => string): Promise<number> {
  const holder = await waitUntil(
    () => {
      const h = findPortHolder(port);
      return h !== null && h !== "unknown" ? h : null;
    },
    { timeoutMs: 60_000, what: `a process listening on ${port}; output so far:\n${output()}` },
  );
  servers.push(holder.pid);
  return holder.pid;
}

/** Signal npm alone; llmgw stops gracefully (its own last words in `said`) and npm exits with it. */
async function stopsWithNpm(child: ChildProcess, signal: NodeJS.Signals, serverPid: number, port: number, output: () => string, said: string): Promise<void> {
  expect(serverPid).not.toBe(child.pid);
  child.kill(signal);
  await waitUntil(() => !isAlive(serverPid) && findPortHolder(port) === null, {
    timeoutMs: 20_000,
    what: `llmgw (pid ${serverPid}) gone after ${signal} to npm; output:\n${output()}`,
  });
  expect(output()).toContain(said);
  await waitUntil(() => child.exitCode !== null || child.signalCode !== null, { timeoutMs: 10_000, what: "npm exited" });
}

describe("llmgw started through npm stops with npm", () => {
  test("npx llmgw serve: SIGTERM to npx stops the gateway", async () => {
    const port = await freePort("127.0.0.1", new Set());
    const config = writeGatewayConfig({ listen: `127.0.0.1:${port}`, endpoints: [{ id: "e1", url: "http://127.0.0.1:9" }] });
    const { child, output } = launch(["npx", "--no-install", "llmgw", "serve", "--config", config]);
    const pid = await serverOn(port, output);
    // Started whole (API and admin listening), so its SIGTERM handling is in place.
    await waitUntil(() => output().split('"msg":"listening"').length > 2, { timeoutMs: 60_000, what: `both listeners up; output:\n${output()}` });
    await stopsWithNpm(child, "SIGTERM", pid, port, output, '"msg":"stopped"');
  }, 90_000);

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    test(`npm start: ${signal} to npm stops the demo and its sim-engines`, async () => {
      const port = await freePort("127.0.0.1", new Set());
      const { child, output } = launch(["npm", "start", "--", "--listen", `127.0.0.1:${port}`, "--admin-listen", "127.0.0.1:0"]);
      const pid = await serverOn(port, output);
      // The demo is npm's own child: npm's signal reaches it directly.
      await waitUntil(() => output().includes("Press Ctrl-C to stop"), { timeoutMs: 60_000, what: `the demo's banner; output:\n${output()}` });
      const engines = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: unknown[] };
      expect(engines.data.length).toBeGreaterThan(0);
      const sims = simEnginePids(pid);
      expect(sims.length).toBeGreaterThan(0);
      await stopsWithNpm(child, signal, pid, port, output, "stopping the gateway and the sim-engines");
      await waitUntil(() => sims.every((p) => !isAlive(p)), { timeoutMs: 10_000, what: "the demo's sim-engines gone" });
    }, 120_000);
  }
});

/** Children of `parent` running a sim-engine, from /proc. */
function simEnginePids(parent: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid) || readStat(pid)?.ppid !== parent) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("sim-engine")) out.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  return out;
}
