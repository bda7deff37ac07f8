/**
 * A gateway's batch part on the shared Redis store, as its own process, for
 * the cluster batch test: `bun cluster-batch-process.ts <redis-url> <prefix>
 * <engine-url> <runner-name> <concurrency> [<lines>]`. With <lines> it first
 * uploads a JSONL of that many chat lines and creates a batch through the real
 * Files and Batches routes (printing {"msg":"batch created","id"}); then it
 * drives every batch in the store against the engine until killed, printing
 * "runner started". It stands in for `llmgw serve` until serve mounts the
 * batch routes and runner (issue 12's wiring).
 */
import { RedisConnection } from "../../src/cluster/redis-connection.ts";
import { RedisJobsStore } from "../../src/cluster/redis-jobs-store.ts";
import { BatchRunner } from "../../src/jobs/batch-runner.ts";
import { createJobsRoutes } from "../../src/jobs/jobs-routes.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { chatBatchJsonl, engineSend } from "./batch-send.ts";

const [url, prefix, engine, name, concurrency, lines] = process.argv.slice(2);
if (!url || !prefix || !engine || !name || !concurrency) {
  console.error("usage: cluster-batch-process.ts <redis-url> <prefix> <engine-url> <runner-name> <concurrency> [<lines>]");
  process.exit(2);
}
setLogLevel("warn");
const redis = new RedisConnection(url, { commandTimeoutMs: 2_000 });
if (!(await redis.connect())) throw new Error(`no redis at ${url}`);
const store = new RedisJobsStore(redis, prefix);
const n = Number(concurrency);
const runner = new BatchRunner({
  store,
  send: engineSend(engine),
  limits: { concurrencyPerBatch: n, concurrencyPerTenant: n, maxAttempts: 3, retryBackoffMs: 50, leaseMs: 1_500 },
  owner: name,
  tickMs: 50,
  audit: () => {},
});
if (lines !== undefined) {
  const routes = createJobsRoutes({ store, knownModel: () => true, limits: { maxFileBytes: 64 << 20, maxLines: 100_000 }, runner });
  const form = new FormData();
  form.set("purpose", "batch");
  form.set("file", new Blob([chatBatchJsonl(Number(lines), "sim-model", 3)]), "lines.jsonl");
  const file = (await (await routes(new Request("http://gw/v1/files", { method: "POST", body: form }), { tenant: "acme" }))!.json()) as { id: string };
  const body = JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" });
  const batch = (await (await routes(new Request("http://gw/v1/batches", { method: "POST", body }), { tenant: "acme" }))!.json()) as { id: string };
  console.log(JSON.stringify({ msg: "batch created", id: batch.id }));
}
await runner.start();
console.log(JSON.stringify({ msg: "runner started", name }));
