import { diesWithParent } from "../shared/parent-binding.ts";

/** A throwaway redis-server (Debian's package) on a free loopback port for a benchmark: no persistence, stopped with the bench. */

interface RedisProcess {
  url: string;
  stop(): Promise<void>;
}

/** Whether a Redis at `url` answers PING now. */
export async function redisAnswers(url: string): Promise<boolean> {
  const c = new Bun.RedisClient(url, { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: 200 });
  try {
    await c.connect();
    return (await c.send("PING", [])) === "PONG";
  } catch {
    return false;
  } finally {
    c.close();
  }
}

/** Start redis-server; throws naming what is missing when it is not installed. */
export async function startRedisProcess(): Promise<RedisProcess> {
  const bin = Bun.which("redis-server");
  if (!bin) throw new Error("redis-server is not on PATH (Debian: apt-get install redis-server)");
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);
  const proc = Bun.spawn(diesWithParent([bin, "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning"]), {
    stdout: "ignore",
    stderr: "inherit",
  });
  const deadline = Date.now() + 10_000;
  while (!(await redisAnswers(`redis://127.0.0.1:${port}`))) {
    if (Date.now() > deadline || proc.exitCode !== null) {
      proc.kill("SIGKILL");
      throw new Error(`redis-server on port ${port} did not start`);
    }
    await Bun.sleep(20);
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    async stop() {
      proc.kill("SIGTERM");
      await proc.exited;
    },
  };
}
