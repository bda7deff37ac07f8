/**
 * Scenario: data_dir on a 48 MiB tmpfs; a batch runs when the disk fills
 * up. Uploads get 507 STORAGE_FULL, reads (a file's content, the batch) and
 * deletes still work, chat completions are served untouched; once room
 * returns the batch resumes by itself and completes with every line once.
 * A tenant over its storage quota is refused with 403 naming the limit.
 */
import { afterAll, expect } from "bun:test";
import { closeSync, openSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { toFile } from "openai";
import { batchEnded, createBatchFrom, expectEachLineEndedOnce, linesDone, openaiClient } from "../helpers/batch-e2e.ts";
import { chatBatchJsonl } from "../helpers/batch-send.ts";
import { startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { testOnSmallFs } from "../helpers/small-filesystem.ts";

const MODEL = "sim-model";
const KEY = "sk-disk-tenant";
const LINES = 300;

afterAll(async () => {
  await stopAll();
});

/** Write zeros into `path` until the file system says it is full. */
function fill(path: string): number {
  const fd = openSync(path, "w");
  const block = Buffer.alloc(256 * 1024);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, block);
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
  return written;
}

testOnSmallFs(
  "a full disk: uploads 507, reads, deletes and chat still work; the batch resumes by itself when room returns, each line once",
  48,
  async (fs) => {
    const sim = await startSim(["--model", MODEL, "--itl-ms", "10", "--prefill-overhead-ms", "5", "--max-num-seqs", "64"]);
    const gw = await startGateway(
      {
        data_dir: join(fs.dir, "data"),
        endpoints: [{ id: "sim-0", url: sim.api, models: [MODEL] }],
        auth: {
          keys: [
            { key: KEY, tenant: "t" },
            { key: "sk-small-quota", tenant: "small" },
          ],
        },
        batch: { concurrency_per_batch: 4, concurrency_per_tenant: 4, retry_backoff_ms: 100, tenant_max_files: 3 },
      },
      1,
    );
    const client = openaiClient(gw.api, KEY);
    const spare = await client.files.create({ file: await toFile(Buffer.from(chatBatchJsonl(4_000, MODEL)), "spare.jsonl"), purpose: "batch" });
    const created = await createBatchFrom(client, chatBatchJsonl(LINES, MODEL, 10));
    await waitUntil(async () => (await linesDone(client, created.id)) >= 20, { timeoutMs: 60_000, what: "20 lines done" });

    // A tenant at its file quota is told which limit.
    const small = openaiClient(gw.api, "sk-small-quota");
    for (const name of ["one", "two", "three"])
      await small.files.create({ file: await toFile(Buffer.from(chatBatchJsonl(1, MODEL)), `${name}.jsonl`), purpose: "batch" });
    const quota = await small.files
      .create({ file: await toFile(Buffer.from(chatBatchJsonl(1, MODEL)), "four.jsonl"), purpose: "batch" })
      .catch((e: unknown) => e);
    expect((quota as { status?: number }).status).toBe(403);
    expect((quota as { message?: string }).message).toContain("batch.tenant_max_files");

    const filler = join(fs.dir, "filler");
    expect(fill(filler)).toBeGreaterThan(0);
    const refused = await client.files
      .create({ file: await toFile(Buffer.from(chatBatchJsonl(200, MODEL)), "more.jsonl"), purpose: "batch" })
      .catch((e: unknown) => e);
    expect((refused as { status?: number }).status).toBe(507);
    expect((refused as { code?: string }).code).toBe("STORAGE_FULL");
    // Reads and inference are untouched.
    expect((await (await client.files.content(spare.id)).text()).split("\n").length).toBe(4_001);
    expect((await client.batches.retrieve(created.id)).request_counts?.failed).toBe(0);
    const chat = await client.chat.completions.create({ model: MODEL, max_tokens: 2, messages: [{ role: "user", content: "disk?" }] });
    expect(chat.choices.length).toBe(1);
    // A delete works on the full disk (and is what an operator does to make room).
    expect(await client.files.delete(spare.id)).toMatchObject({ id: spare.id, deleted: true });
    expect(await client.files.retrieve(spare.id).catch((e: unknown) => (e as { status?: number }).status)).toBe(404);

    // Room again: the batch finishes on its own.
    rmSync(filler);
    const done = await batchEnded(client, created.id, 90_000);
    expect(done.status).toBe("completed");
    const { output } = await expectEachLineEndedOnce(client, done, LINES);
    expect(output.every((l) => l.response?.status_code === 200)).toBe(true);
    await gw.stop();
    await sim.stop();
  },
  150_000,
);
