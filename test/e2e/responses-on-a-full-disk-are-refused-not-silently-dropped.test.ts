/**
 * Scenario: data_dir on a small tmpfs, filled up after the responses store
 * is open. A response asking to be stored is still answered (it was
 * generated before the write failed) but counted and logged as not stored;
 * from then on a background response and any request to store get 507
 * STORAGE_FULL with Retry-After before an engine runs, while `store: false`
 * is served.
 */
import { afterAll, expect } from "bun:test";
import { closeSync, openSync, writeSync } from "node:fs";
import { join } from "node:path";
import { counterValue, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { testOnSmallFs } from "../helpers/small-filesystem.ts";

afterAll(async () => {
  await stopAll();
});

function fill(path: string): void {
  const fd = openSync(path, "w");
  const block = Buffer.alloc(64 * 1024);
  try {
    for (;;) writeSync(fd, block);
  } catch (err) {
    if ((err as { code?: string }).code !== "ENOSPC") throw err;
  } finally {
    closeSync(fd);
  }
}

testOnSmallFs(
  "a full disk: an answered response is counted as not stored, then requests to store get 507 with Retry-After and store:false is served",
  16,
  async (fs) => {
    const sim = await startSim(["--model", "m", "--output-len", "3"]);
    const gw = await startGateway({ data_dir: join(fs.dir, "data"), models: [{ name: "m" }], endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
    const create = (body: Record<string, unknown>) =>
      fetch(`${gw.api}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: "m", input: "hi", ...body }),
      });
    const first = await create({});
    expect(first.status).toBe(200); // the store is open
    // An answer is stored as it finishes, after it went out: wait until it is, or filling the disk may fail that write.
    const firstId = ((await first.json()) as { id: string }).id;
    await waitUntil(async () => (await fetch(`${gw.api}/v1/responses/${firstId}`)).status === 200, { timeoutMs: 10_000, what: "the first response stored" });
    fill(join(fs.dir, "filler"));

    const big = await create({ input: "word ".repeat(2_000) });
    expect(big.status).toBe(200);
    const { id } = (await big.json()) as { id: string };
    expect((await fetch(`${gw.api}/v1/responses/${id}`)).status).toBe(404);
    expect(counterValue(await gw.metrics(), "llmgw_responses_not_stored_total", { reason: "storage_full" })).toBe(1);

    for (const body of [{ background: true }, {}]) {
      const res = await create(body);
      expect(res.status).toBe(507);
      expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe("STORAGE_FULL");
    }
    expect((await create({ store: false })).status).toBe(200);
  },
  120_000,
);
