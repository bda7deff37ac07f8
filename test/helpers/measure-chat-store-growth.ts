/**
 * Measures how a stored conversation grows: a T-turn chat through the
 * gateway (each turn ~B bytes of user text, previous_response_id chaining
 * them), then the size of responses.sqlite against the user text sent.
 * Usage: bun test/helpers/measure-chat-store-growth.ts [turns=60] [bytesPerTurn=7700]
 */
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startGateway, startSim } from "./cluster.ts";
import { stopAll } from "./processes.ts";

const turns = Number(process.argv[2] ?? 60);
const bytes = Number(process.argv[3] ?? 7_700);
const dataDir = mkdtempSync(join(tmpdir(), "llmgw-chat-growth-"));
try {
  const sim = await startSim(["--model", "m", "--output-len", "20"]);
  const gw = await startGateway({ data_dir: dataDir, models: [{ name: "m" }], endpoints: [{ id: "sim", url: sim.api, models: ["m"] }] }, 1);
  let previous: string | undefined;
  for (let t = 0; t < turns; t++) {
    const body = { model: "m", input: `turn ${t} ${"x".repeat(bytes)}`, max_output_tokens: 20, ...(previous ? { previous_response_id: previous } : {}) };
    const res = await fetch(`${gw.api}/v1/responses`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`turn ${t}: ${res.status} ${await res.text()}`);
    previous = ((await res.json()) as { id: string }).id;
  }
  await stopAll();
  const db = new Database(join(dataDir, "responses.sqlite"));
  db.run("PRAGMA wal_checkpoint(TRUNCATE)");
  const pages = db.query<{ n: number }, []>("SELECT page_count * page_size AS n FROM pragma_page_count(), pragma_page_size()").get()!.n;
  db.close();
  console.log(
    JSON.stringify({
      turns,
      userTextMb: +((turns * bytes) / 1e6).toFixed(2),
      storeMb: +(pages / 1e6).toFixed(2),
      ratio: +(pages / (turns * bytes)).toFixed(1),
    }),
  );
} finally {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
}
