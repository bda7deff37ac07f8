/** Run `llmgw bench <scenario> ... --json` in its own process (its load then carries no test-runner queuing) and return its report. */
import { expect } from "bun:test";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "./processes.ts";

export async function runBenchJson<T>(args: string[]): Promise<T> {
  const proc = Bun.spawn([process.execPath, CLI, "bench", ...args, "--json"], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, err: code === 0 ? "" : err.slice(-2000) }).toEqual({ code: 0, err: "" });
  return JSON.parse(out.trim().split("\n").at(-1)!) as T;
}
