/**
 * Must-show (issue 14): three gateways share a redis-server. The real
 * `openai` client uploads a 1,000-line JSONL and creates a batch on one of
 * them, which is SIGKILLed mid-batch: the other two drive the batch to the end
 * (the dead one's claimed lines are claimed again once their leases lapse),
 * the client — now talking to the survivors — sees it complete and downloads
 * an output with every custom_id exactly once; the engine saw at most the
 * lines in flight at the kill twice.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI, { toFile } from "openai";
import { DEFAULT_RESULT_FLUSH_LINES } from "../../src/jobs/pending-results.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { RedisConnection } from "../../src/shared-state/redis-connection.ts";
import { chatBatchJsonl, expectEveryLineOnce } from "../helpers/batch-send.ts";
import { type Sim, startSim } from "../helpers/cluster.ts";
import { type ClusterGateway, startGatewayCluster } from "../helpers/gateway-cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { describeWithRedis, type RedisServer, startRedisServer, stopRedisServers } from "../helpers/redis-server.ts";

const MODEL = "sim-model";
const LINES = 1_000;
const CONCURRENCY = 12;
const KEY = "sk-batch-tenant-0";
let redis: RedisServer;
let sim: Sim;
let gws: ClusterGateway[];
let conn: RedisConnection;

describeWithRedis("a batch whose gateway dies", () => {
  beforeAll(async () => {
    setLogLevel("warn");
    redis = await startRedisServer();
    // ~30 ms a line at 36 in flight: a few seconds for the batch, so the kill lands mid-way.
    sim = await startSim(["--model", MODEL, "--itl-ms", "8", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"]);
    gws = await startGatewayCluster(
      redis,
      3,
      {
        log_level: "warn",
        endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
        auth: { keys: [{ key: KEY, tenant: "evals" }] },
        batch: { concurrency_per_batch: CONCURRENCY, concurrency_per_tenant: CONCURRENCY, lease_ms: 1_500 },
      },
      { readyEndpoints: 1, state: { lease_ms: 2_000, sync_interval_ms: 500 } },
    );
    conn = new RedisConnection(redis.url, { commandTimeoutMs: 2_000 });
    await conn.connect();
  }, 90_000);

  afterAll(async () => {
    conn?.close();
    await stopAll();
    await stopRedisServers();
  });

  test("SIGKILL the gateway that created it: the others finish it, every line exactly once", async () => {
    const [creator, b, c] = gws as [ClusterGateway, ClusterGateway, ClusterGateway];
    const client = (gw: ClusterGateway) => new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: KEY, maxRetries: 0 });
    const file = await client(creator).files.create({ file: await toFile(Buffer.from(chatBatchJsonl(LINES, MODEL, 3)), "evals.jsonl"), purpose: "batch" });
    const created = await client(creator).batches.create({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
    expect(created.request_counts).toEqual({ total: LINES, completed: 0, failed: 0 });
    // Another gateway sees the same batch at once.
    expect((await client(b).batches.retrieve(created.id)).id).toBe(created.id);

    await waitUntil(async () => ((await client(b).batches.retrieve(created.id)).request_counts?.completed ?? 0) >= 300, {
      timeoutMs: 60_000,
      intervalMs: 20,
      what: "300 lines done",
    });
    await creator.stop("SIGKILL");
    // Claimed by the dead gateway's runner (owner "runner-<pid>-…") and not recorded: what may reach the engine twice —
    // in flight, answered with the result not written yet, or claimed ahead of a free slot (never sent).
    const owners = (await conn.send("HVALS", [`llmgw:jobs:batch:${created.id}:owner`])) as string[];
    const inFlight = owners.filter((o) => o.startsWith(`runner-${creator.proc.pid}-`)).length;
    expect(inFlight).toBeGreaterThan(0);
    expect(inFlight).toBeLessThanOrEqual(CONCURRENCY + Math.ceil(CONCURRENCY / 4) + DEFAULT_RESULT_FLUSH_LINES);
    expect((await client(b).batches.retrieve(created.id)).request_counts!.completed).toBeLessThan(LINES);

    const done = await waitUntil(
      async () => {
        const batch = await client(c).batches.retrieve(created.id);
        return batch.status === "completed" ? batch : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 100, what: "batch completed by the other gateways" },
    );
    expect(done.request_counts).toEqual({ total: LINES, completed: LINES, failed: 0 });
    const text = await (await client(b).files.content(done.output_file_id!)).text();
    expectEveryLineOnce(text, LINES);
    const engineRequests = Number((await sim.state()).requests_total);
    expect(engineRequests).toBeGreaterThanOrEqual(LINES);
    expect(engineRequests).toBeLessThanOrEqual(LINES + inFlight);
    console.error(`cluster batch e2e: ${inFlight} lines in flight at the kill; the engine saw ${engineRequests} requests for ${LINES} lines`);
  }, 150_000);
});
