#!/usr/bin/env node
/**
 * Runs the project's pinned Bun (the `bun` devDependency) with the
 * environment every llmgw process needs. Bun reads some limits only at
 * process start (BUN_CONFIG_MAX_HTTP_REQUESTS: outbound fetches in flight,
 * 256 by default, which silently queues request 257+), so they must be set
 * before Bun starts; setting process.env later has no effect.
 *
 * Usage: node bin/bun-env.mjs <bun arguments…>
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

export const BUN_ENV_DEFAULTS = {
  BUN_CONFIG_MAX_HTTP_REQUESTS: "16384",
};

export function findBun() {
  // The npm package names its binary bun.exe on every platform.
  const local = join(root, "node_modules", "bun", "bin", "bun.exe");
  if (existsSync(local)) return local;
  return "bun"; // a globally installed Bun, if the devDependency is missing
}

export function runBun(args) {
  const env = { ...process.env };
  for (const [k, v] of Object.entries(BUN_ENV_DEFAULTS)) env[k] ??= v;
  const child = spawn(findBun(), args, { stdio: "inherit", env });
  // The child shares our terminal and receives Ctrl-C itself; forward the
  // signals a supervisor (systemd, docker, a test) sends to us alone.
  for (const sig of ["SIGTERM", "SIGHUP"]) {
    process.on(sig, () => child.kill(sig));
  }
  process.on("SIGINT", () => {}); // let the child decide how to stop
  child.on("exit", (code, signal) => {
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
  child.on("error", (err) => {
    console.error(`llmgw: cannot start Bun (${err.message}); run 'npm install' first`);
    process.exit(127);
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  runBun(process.argv.slice(2));
}
