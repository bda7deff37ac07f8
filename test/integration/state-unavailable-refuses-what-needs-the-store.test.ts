/**
 * Fail static (issue 14) for what needs the shared store: with Redis away,
 * uploads, batch creation and reads, requests with an Idempotency-Key and
 * fleet store writes are refused with STATE_UNAVAILABLE (503, Retry-After), the response cache is
 * a plain miss, and all of it works again — with the data — once Redis is back.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { ResponseCache } from "../../src/cache/response-cache-store.ts";
import { handleIdempotently, IdempotencyGate } from "../../src/jobs/idempotency-gate.ts";
import { createJobsRoutes } from "../../src/jobs/jobs-routes.ts";
import { asLlmgwError, errorResponse, LlmgwError } from "../../src/shared/errors.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { RedisFleetStore } from "../../src/shared-state/redis-fleet-store.ts";
import { RedisIdempotencyStore } from "../../src/shared-state/redis-idempotency-store.ts";
import { RedisJobsStore } from "../../src/shared-state/redis-jobs-store.ts";
import { RedisResponseCacheStore } from "../../src/shared-state/redis-response-cache-store.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { routesDeps } from "../helpers/jobs-routes-deps.ts";
import { waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

let server: RedisServer;
let redis: RedisConnection;

describeWithRedis("what needs the shared store while Redis is away", () => {
  beforeAll(async () => {
    setLogLevel("silent");
    server = await startRedisServer({ persist: true });
    redis = new RedisConnection(server.url, { commandTimeoutMs: 300, reconnectEveryMs: 50 });
    await redis.connect();
  });
  afterAll(async () => {
    redis?.close();
    await stopRedisServers();
    setLogLevel("info");
  });

  test("503 STATE_UNAVAILABLE for uploads, batches and idempotent requests; the cache misses; all back, with the data, when Redis returns", async () => {
    const jobs = createJobsRoutes(
      routesDeps({ store: new RedisJobsStore(redis, "t:"), knownModel: () => true, limits: { maxFileBytes: 1 << 20, maxLines: 100 } }),
    );
    const gate = new IdempotencyGate(new RedisIdempotencyStore(redis, "t:"), { ttlMs: 60_000, waitMs: 100, maxResponseBytes: 1 << 20 }, { lockMs: 30_000 });
    const cache = new ResponseCache({ models: ["m"], maxBytes: 1 << 20, maxEntryBytes: 1 << 16, ttlMs: 60_000 }, new RedisResponseCacheStore(redis, "t:"));
    const principal = { tenant: "acme" };
    const upload = () => {
      const form = new FormData();
      form.set("purpose", "batch");
      form.set("file", new Blob([chatBatchJsonl(3, "m")]), "in.jsonl");
      return jobs(new Request("http://gw/v1/files", { method: "POST", body: form }), principal);
    };
    const createBatch = (fileId: string) =>
      jobs(
        new Request("http://gw/v1/batches", {
          method: "POST",
          body: JSON.stringify({ input_file_id: fileId, endpoint: "/v1/chat/completions", completion_window: "24h" }),
        }),
        principal,
      );
    const idempotent = async () => {
      const req = new Request("http://gw/v1/chat/completions", { method: "POST", headers: { "idempotency-key": "k-1" }, body: "{}" });
      try {
        return await handleIdempotently(gate, req, "acme", 1 << 20, async () => new Response('{"ok":true}'));
      } catch (err) {
        return errorResponse(asLlmgwError(err));
      }
    };
    const lookup = { tenant: "acme", route: "chat" as const, requestedModel: "m", model: "m", body: { model: "m", temperature: 0, messages: [] } };

    const file = (await (await upload())!.json()) as { id: string };
    const batch = (await (await createBatch(file.id))!.json()) as { id: string };
    const first = await idempotent();
    expect(first.status).toBe(200);
    await first.text(); // recorded once relayed whole
    await Bun.sleep(20);

    await server.stop();
    for (const res of [
      await upload(),
      await createBatch(file.id),
      await jobs(new Request(`http://gw/v1/batches/${batch.id}`), principal),
      await idempotent(),
    ]) {
      expect(res!.status).toBe(503);
      expect(res!.headers.get("retry-after")).toBe("1");
      const body = (await res!.json()) as { error: { code: string; type: string; message: string } };
      expect(body.error).toMatchObject({ code: "STATE_UNAVAILABLE", type: "service_unavailable_error" });
      expect(body.error.message).toContain("Redis");
    }
    expect((await cache.check(lookup)).kind).toBe("miss");
    expect(redis.up).toBe(false);
    // The fleet's management API writes to the store first: refused the same way (its error handler answers 503).
    const fleetWrite = await new RedisFleetStore(redis, "t:").cordons.put("node-a", { node: "node-a", reason: null, at: 1 }).catch((err: unknown) => err);
    expect(fleetWrite).toBeInstanceOf(LlmgwError);
    expect((fleetWrite as LlmgwError).code).toBe("STATE_UNAVAILABLE");

    await server.start();
    await waitUntil(() => redis.up, { timeoutMs: 5_000, what: "reconnected" });
    const again = await jobs(new Request(`http://gw/v1/batches/${batch.id}`), principal);
    expect(again!.status).toBe(200);
    expect(((await again!.json()) as { id: string }).id).toBe(batch.id);
    expect((await upload())!.status).toBe(200);
    const replay = await idempotent();
    expect(replay.headers.get("x-llmgw-replay")).toBe("true");
  });
});
