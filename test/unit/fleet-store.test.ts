/** The embedded (bun:sqlite) fleet store: the shared store contract, WAL, and rows that cannot be read. */
import { Database } from "bun:sqlite";
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FLEET_DB_FILE, SqliteFleetStore } from "../../src/control/sqlite-store.ts";
import { setLogLevel } from "../../src/shared/logger.ts";
import { fleetStoreContract, SAMPLE_REPLICA } from "../helpers/fleet-store-contract.ts";

const root = mkdtempSync(join(tmpdir(), "fleet-store-"));
let n = 0;
const fresh = () => join(root, `s${n++}`);
afterAll(() => rmSync(root, { recursive: true, force: true }));

fleetStoreContract("sqlite", fresh, (dir) => new SqliteFleetStore(dir));

describe("sqlite fleet store", () => {
  test("uses WAL in <data_dir>/fleet.sqlite, creating the directory", async () => {
    const dir = join(fresh(), "nested", "data");
    const store = new SqliteFleetStore(dir);
    expect(store.journalMode()).toBe("wal");
    await store.close();
    expect(await Bun.file(join(dir, FLEET_DB_FILE)).exists()).toBe(true);
  });

  test("a row that is not a valid record is skipped (and the others still read)", async () => {
    setLogLevel("silent");
    const dir = fresh();
    const store = new SqliteFleetStore(dir);
    await store.replicas.put(SAMPLE_REPLICA.id, SAMPLE_REPLICA);
    const db = new Database(join(dir, FLEET_DB_FILE));
    db.run("INSERT INTO fleet_records (collection, key, json, updated_at) VALUES ('replicas', 'broken', '{\"id\":\"broken\"}', 0)");
    db.run("INSERT INTO fleet_records (collection, key, json, updated_at) VALUES ('replicas', 'garbage', 'not json', 0)");
    db.close();
    expect((await store.replicas.list()).map((r) => r.id)).toEqual([SAMPLE_REPLICA.id]);
    expect(await store.replicas.get("broken")).toBeUndefined();
    await store.close();
    setLogLevel("info");
  });
});
