/** Run `llmgw bench <scenario> ...` in its own process (its load then carries no test-runner queuing): its exit code and output, or its --json report. */
import { expect } from "bun:test";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "./processes.ts";

export async function runBench(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([process.execPath, CLI, "bench", ...args], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, stdout, stderr };
}

export async function runBenchJson<T>(args: string[]): Promise<T> {
  const r = await runBench([...args, "--json"]);
  expect({ code: r.code, err: r.code === 0 ? "" : r.stderr.slice(-2000) }).toEqual({ code: 0, err: "" });
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as T;
}
