/**
 * Measures another tenant's GET /health while two clients page
 * GET /v1/responses/{id}/input_items?limit=1 through a stored input of N
 * items (~4 MB at 110k): prints the /health p50/p99 with and without the
 * paging. Usage: bun test/helpers/measure-input-items-paging.ts [items=110000] [seconds=10]
 * It writes through SqliteResponsesStore, so it runs unchanged on older code.
 */
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteResponsesStore } from "../../src/jobs/responses-store.ts";
import { startGateway, startSim } from "./cluster.ts";
import { stopAll } from "./processes.ts";

const n = Number(process.argv[2] ?? 110_000);
const seconds = Number(process.argv[3] ?? 10);
const dataDir = mkdtempSync(join(tmpdir(), "llmgw-paging-"));

async function healthFor(api: string, ms: number): Promise<{ p50: string; p99: string; probes: number }> {
  const lat: number[] = [];
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const s = performance.now();
    await (await fetch(`${api}/health`)).arrayBuffer();
    lat.push(performance.now() - s);
    await Bun.sleep(20);
  }
  lat.sort((a, b) => a - b);
  return { p50: lat[Math.floor(lat.length / 2)]!.toFixed(1), p99: lat[Math.floor(lat.length * 0.99)]!.toFixed(1), probes: lat.length };
}

try {
  const db = new Database(join(dataDir, "responses.sqlite"), { create: true, strict: true });
  db.run("PRAGMA journal_mode = WAL");
  const items = Array.from({ length: n }, (_, i) => ({ id: `m${i}`, role: "user", content: "x" }));
  const input = JSON.stringify(items);
  const now = Date.now();
  await new SqliteResponsesStore(db).put(
    {
      id: "resp_big",
      tenant: "default",
      createdMs: now,
      expiresMs: now + 3_600_000,
      status: "completed",
      response: '{"id":"resp_big","object":"response","output":[]}',
      input,
      context: "[]",
    },
    Number.MAX_SAFE_INTEGER,
  );
  db.close();
  const sim = await startSim(["--model", "m"]);
  const gw = await startGateway({ data_dir: dataDir, models: [{ name: "m" }], endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
  await Bun.sleep(1_000);
  const quiet = await healthFor(gw.api, 3_000);
  let stop = false;
  let pages = 0;
  const pager = async () => {
    let after: string | null = null;
    while (!stop) {
      const res = await fetch(`${gw.api}/v1/responses/resp_big/input_items?limit=1${after ? `&after=${after}` : ""}`);
      const page = (await res.json()) as { last_id: string | null; has_more: boolean };
      pages++;
      after = page.has_more ? page.last_id : null;
    }
  };
  const pagers = [pager(), pager()];
  const busy = await healthFor(gw.api, seconds * 1000);
  stop = true;
  await Promise.all(pagers);
  console.log(JSON.stringify({ items: n, inputMb: +(input.length / 1e6).toFixed(1), quietHealth: quiet, pagingHealth: busy, pagesServed: pages }));
} finally {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
}
