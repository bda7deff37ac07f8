#!/usr/bin/env node
/**
 * `node bin/llmgw.mjs …`, for habits and tools that start llmgw through Node.
 * Node 20 cannot exec, so Bun runs as a child bound to this process
 * (LLMGW_PARENT_PID: the kernel stops it when this process dies, even by
 * SIGKILL). Supervisors should start bin/llmgw instead, where Bun is the
 * process itself.
 */
import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const bin = dirname(fileURLToPath(import.meta.url));
const child = spawn("/bin/sh", [join(bin, "bun-env"), join(bin, "..", "src", "cli.ts"), ...process.argv.slice(2)], {
  stdio: "inherit",
  env: { ...process.env, LLMGW_PARENT_PID: String(process.pid) },
});
// The child shares our terminal and receives Ctrl-C itself; forward the
// signals a supervisor (systemd, docker, a test) sends to us alone.
for (const sig of ["SIGTERM", "SIGHUP"]) process.on(sig, () => child.kill(sig));
process.on("SIGINT", () => {});
child.on("exit", (code, signal) => {
  if (signal) process.kill(process.pid, signal);
  else process.exit(code ?? 1);
});
child.on("error", (err) => {
  console.error(`llmgw: cannot start /bin/sh (${err.message})`);
  process.exit(127);
});
