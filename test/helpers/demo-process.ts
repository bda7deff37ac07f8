/** `llmgw demo` (plain or `--fleet`) as the end-to-end tests start it: on port 0, bound to the test process, in a process group of its own so the test can kill it whole. */
import type { Subprocess } from "bun";
import { childEnv } from "../../src/shared/process-env.ts";
import { CLI, REPO_ROOT } from "./processes.ts";

export type DemoProcess = Subprocess<"ignore", "pipe", "pipe">;

/** Start `llmgw demo <extra…>` listening on loopback port 0; the caller reads its banner from stdout. */
export function spawnDemo(extra: readonly string[] = []): DemoProcess {
  return Bun.spawn([process.execPath, CLI, "demo", ...extra, "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"], {
    cwd: REPO_ROOT,
    env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    detached: true,
  });
}

/** The demo's whole banner, once it is out (its Dashboard line and "Press Ctrl-C"); throws with what it printed if it ends first. */
export async function demoBanner(demo: DemoProcess): Promise<string> {
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of demo.stdout) {
    text += decoder.decode(chunk, { stream: true });
    if (/Dashboard\s+\S+\/dashboard/.test(text) && text.includes("Press Ctrl-C")) return text;
  }
  throw new Error(`the demo ended before its banner:\n${text}${await new Response(demo.stderr).text()}`);
}

/** The admin URL from the demo's banner (its Dashboard line). */
export async function demoAdminUrl(demo: DemoProcess): Promise<string> {
  return /Dashboard\s+(\S+)\/dashboard/.exec(await demoBanner(demo))![1]!;
}
