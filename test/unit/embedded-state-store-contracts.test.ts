/** The idempotency, response-cache, responses and key store contracts against the embedded backends (bun:sqlite, in-process LRU); Redis runs the same suites in test/integration/state-stores-on-redis.test.ts. */
import { Database } from "bun:sqlite";
import { MemoryResponseCacheStore } from "../../src/cache/response-cache-store.ts";
import { SqliteIdempotencyStore } from "../../src/jobs/idempotency-store.ts";
import { SqliteResponsesStore } from "../../src/jobs/responses-store.ts";
import { SqliteKeyStore } from "../../src/keys/key-store.ts";
import { idempotencyStoreContract } from "../helpers/idempotency-store-contract.ts";
import { keyStoreContract } from "../helpers/key-store-contract.ts";
import { responseCacheStoreContract } from "../helpers/response-cache-store-contract.ts";
import { responsesStoreContract } from "../helpers/responses-store-contract.ts";

idempotencyStoreContract("bun:sqlite", () => new SqliteIdempotencyStore(new Database(":memory:", { strict: true })));
responseCacheStoreContract("in-process", () => new MemoryResponseCacheStore(64 * 1024));
responsesStoreContract("bun:sqlite", () => new SqliteResponsesStore(new Database(":memory:", { strict: true })));

const keyDbs = new Map<object, Database>();
keyStoreContract(
  "bun:sqlite",
  () => {
    const db = new Database(":memory:", { strict: true });
    const s = new SqliteKeyStore(db);
    keyDbs.set(s, db);
    return s;
  },
  async (s, id) => void keyDbs.get(s)!.query("INSERT INTO live_keys (id, doc) VALUES (?, ?)").run(id, "{not json"),
);
