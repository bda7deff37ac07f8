/**
 * Scenario: a gateway on Redis (state.backend: redis) while Redis is hung
 * (SIGSTOP: its connections open, nothing answered). An upload fails fast
 * with 503 STATE_UNAVAILABLE (within a few command timeouts, not 90 s),
 * inference is still served; after SIGCONT the upload works, and a batch
 * made from it completes with every line once.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { toFile } from "openai";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const MODEL = "sim-model";
const KEY = "sk-redis-tenant";
const TIMEOUT_MS = 500;

describeWithRedis("an upload while Redis is hung", () => {
  let redis: RedisServer;
  let sim: Sim;
  let gw: Gateway;

  beforeAll(async () => {
    redis = await startRedisServer();
    sim = await startSim(["--model", MODEL, "--itl-ms", "1", "--prefill-overhead-ms", "1"]);
    gw = await startGateway(
      {
        endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
        auth: { keys: [{ key: KEY, tenant: "t" }] },
        state: { backend: "redis", redis_url: redis.url, command_timeout_ms: TIMEOUT_MS, sync_interval_ms: 500 },
      },
      1,
    );
  });

  afterAll(async () => {
    redis?.signal("SIGCONT");
    await stopAll();
    await stopRedisServers();
  });

  test("SIGSTOP: 503 STATE_UNAVAILABLE within seconds, inference served; SIGCONT: the upload and its batch go through, each line once", async () => {
    const client = openaiClient(gw.api, KEY);
    redis.signal("SIGSTOP");
    try {
      const started = performance.now();
      const err = await client.files
        .create({ file: await toFile(Buffer.from(chatBatchJsonl(50, MODEL)), "in.jsonl"), purpose: "batch" })
        .catch((e: unknown) => e);
      const tookMs = performance.now() - started;
      expect((err as { status?: number }).status).toBe(503);
      expect((err as { code?: string }).code).toBe("STATE_UNAVAILABLE");
      expect(tookMs).toBeLessThan(10 * TIMEOUT_MS);
      const chat = await client.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: "user", content: "still here?" }] });
      expect(chat.choices.length).toBe(1);
    } finally {
      redis.signal("SIGCONT");
    }
    const created = await waitUntil(() => createBatchFrom(client, chatBatchJsonl(50, MODEL)).catch(() => undefined), {
      timeoutMs: 20_000,
      intervalMs: 250,
      what: "an upload once Redis is back",
    });
    const done = await batchEnded(client, created.id, 60_000);
    expect(done.status).toBe("completed");
    await expectEachLineEndedOnce(client, done, 50);
  }, 120_000);
});
