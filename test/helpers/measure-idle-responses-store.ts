/**
 * Measures an idle gateway over a large Responses store: fills a fresh
 * data_dir's responses.sqlite with N big completed responses (no background
 * response), starts `llmgw serve` on it, sends nothing but GET /health every
 * 20 ms for D seconds and prints the /health p50/p99/max and the gateway's
 * CPU share meanwhile (utime+stime from /proc). Usage:
 *   bun test/helpers/measure-idle-responses-store.ts [records=20] [mbPerRecord=8] [seconds=10]
 * It writes through SqliteResponsesStore, so it runs unchanged on older code.
 */
import { Database } from "bun:sqlite";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SqliteResponsesStore } from "../../src/jobs/responses-store.ts";
import { startGateway, startSim } from "./cluster.ts";
import { stopAll } from "./processes.ts";

const records = Number(process.argv[2] ?? 20);
const mb = Number(process.argv[3] ?? 8);
const seconds = Number(process.argv[4] ?? 10);

function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15 of stat)
}

const dataDir = mkdtempSync(join(tmpdir(), "llmgw-idle-store-"));
try {
  const db = new Database(join(dataDir, "responses.sqlite"), { create: true, strict: true });
  db.run("PRAGMA journal_mode = WAL");
  const store = new SqliteResponsesStore(db);
  // Half the bytes in the input, half in the conversation, as a long first turn stores them.
  const text = "lorem ipsum dolor sit amet ".repeat(Math.ceil((mb * 1_000_000) / 2 / 27)).slice(0, (mb * 1_000_000) / 2);
  const now = Date.now();
  for (let i = 0; i < records; i++) {
    const items = JSON.stringify([{ role: "user", content: text }]);
    const id = `resp_idle${i}`;
    await store.put(
      {
        id,
        tenant: "t",
        createdMs: now + i,
        expiresMs: now + 86_400_000,
        status: "completed",
        response: JSON.stringify({ id, object: "response", status: "completed", output: [] }),
        input: items,
        context: items,
      },
      Number.MAX_SAFE_INTEGER,
    );
  }
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  db.close();
  const storeMb = statSync(join(dataDir, "responses.sqlite")).size / 1e6;

  const sim = await startSim(["--model", "m"]);
  const gw = await startGateway({ data_dir: dataDir, models: [{ name: "m" }], endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
  await Bun.sleep(2_000); // past start-up
  const pid = gw.proc.pid;
  const hz = 100; // USER_HZ on Linux
  const lat: number[] = [];
  const t0 = performance.now();
  const c0 = cpuTicks(pid);
  while (performance.now() - t0 < seconds * 1000) {
    const s = performance.now();
    await (await fetch(`${gw.api}/health`)).arrayBuffer();
    lat.push(performance.now() - s);
    await Bun.sleep(20);
  }
  const cpu = (cpuTicks(pid) - c0) / hz / ((performance.now() - t0) / 1000);
  lat.sort((a, b) => a - b);
  const q = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]!.toFixed(1);
  console.log(
    JSON.stringify({
      records,
      storeMb: Math.round(storeMb),
      probes: lat.length,
      healthP50Ms: q(0.5),
      healthP99Ms: q(0.99),
      healthMaxMs: lat[lat.length - 1]!.toFixed(1),
      gatewayCpuPct: Math.round(cpu * 100),
    }),
  );
} finally {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
}
