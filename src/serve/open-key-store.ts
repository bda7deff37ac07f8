/** Opens the embedded key store (keys.sqlite in data_dir), or, when the file cannot be opened, a store that refuses every call with the reason: inference goes on with the config's keys. */
import { openStateDatabase } from "../jobs/state-db.ts";
import { type KeyStore, SqliteKeyStore } from "../keys/key-store.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { Logger } from "../shared/logger.ts";

const KEYS_DB_FILE = "keys.sqlite";

export function openKeyStore(dataDir: string, log: Pick<Logger, "error">): KeyStore {
  try {
    return new SqliteKeyStore(openStateDatabase(dataDir, { file: KEYS_DB_FILE }));
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    log.error({ err: why, data_dir: dataDir }, `live keys are off: ${KEYS_DB_FILE} cannot be opened`);
    const refuse = async (): Promise<never> => {
      throw new LlmgwError("STATE_UNAVAILABLE", `live keys are off on this gateway: ${KEYS_DB_FILE} in data_dir cannot be opened (${why})`);
    };
    return { version: refuse, list: refuse, get: refuse, put: refuse, addUsage: refuse, usage: refuse };
  }
}
