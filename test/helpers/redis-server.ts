/**
 * A real redis-server (Debian's package) on a free loopback port for a test
 * file, without persistence unless asked (then an append-only file, synced on
 * every write, in a temporary directory); stop() and start() again on the
 * same port let a test take Redis away and bring it back. Tests that need one use
 * `describeWithRedis` or `testWithTool("redis-server", …)`.
 */
import { describe } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { redisAnswers } from "../../src/bench/redis-process.ts";
import { diesWithParent } from "../../src/shared/parent-binding.ts";
import { findTool, missingToolsTest } from "./system-tools.ts";

export interface RedisServer {
  port: number;
  url: string;
  /** Stop the server (SIGTERM); without persistence its data is gone. */
  stop(): Promise<void>;
  /** Start it again on the same port (empty, or with what it had when persisting). */
  start(): Promise<void>;
  /** Whether it runs now. */
  readonly running: boolean;
  /** Send the server a signal (SIGSTOP: hung, connections open; SIGCONT: back). */
  signal(sig: NodeJS.Signals): void;
}

async function freePort(): Promise<number> {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

const servers: { server: RedisServer; dir: string | undefined }[] = [];

export async function startRedisServer(opts: { persist?: boolean } = {}, bin = findTool("redis-server") ?? "redis-server"): Promise<RedisServer> {
  const port = await freePort();
  const dir = opts.persist ? mkdtempSync(join(tmpdir(), "llmgw-redis-")) : undefined;
  const storage = dir === undefined ? ["--save", "", "--appendonly", "no"] : ["--dir", dir, "--save", "", "--appendonly", "yes", "--appendfsync", "always"];
  const url = `redis://127.0.0.1:${port}`;
  let proc: Bun.Subprocess | undefined;
  const server: RedisServer = {
    port,
    url,
    get running() {
      return proc !== undefined && proc.exitCode === null && proc.signalCode === null;
    },
    async start() {
      proc = Bun.spawn(diesWithParent([bin, "--port", String(port), "--bind", "127.0.0.1", ...storage, "--protected-mode", "no", "--loglevel", "warning"]), {
        stdout: "ignore",
        stderr: "inherit",
      });
      const deadline = Date.now() + 10_000;
      while (!(await redisAnswers(url))) {
        if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`redis-server on port ${port} did not start`);
        await Bun.sleep(20);
      }
    },
    signal(sig: NodeJS.Signals) {
      proc?.kill(sig);
    },
    async stop() {
      if (!proc) return;
      proc.kill("SIGTERM");
      await proc.exited;
      proc = undefined;
    },
  };
  await server.start();
  servers.push({ server, dir });
  return server;
}

/** Stop every server this test file started (and remove their files). */
export async function stopRedisServers(): Promise<void> {
  await Promise.all(
    servers.splice(0).map(async ({ server, dir }) => {
      await server.stop();
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    }),
  );
}

/** `describe` when redis-server is installed; otherwise skipped, or a failing test under LLMGW_REQUIRE_SYSTEM_TESTS=1. */
export function describeWithRedis(name: string, fn: () => void): void {
  if (findTool("redis-server")) describe(name, fn);
  else missingToolsTest(name, ["redis-server"]);
}
