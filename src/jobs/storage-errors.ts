/** Failures of the storage under the jobs store, read as what they mean to a client: a full disk, or a store that cannot be read. */
import { LlmgwError } from "../shared/errors.ts";

const FULL = new Set(["SQLITE_FULL", "ENOSPC", "EDQUOT"]);
const CORRUPT = new Set(["SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_CORRUPT_INDEX", "SQLITE_CORRUPT_SEQUENCE", "SQLITE_CORRUPT_VTAB", "SQLITE_IOERR"]);

function codeOf(err: unknown): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const code = (err as { code?: unknown }).code;
  return typeof code === "string" ? code : undefined;
}

/** The disk (or quota) under data_dir has no room (SQLITE_FULL, ENOSPC, EDQUOT). */
export function isStorageFull(err: unknown): boolean {
  const code = codeOf(err);
  return (code !== undefined && FULL.has(code)) || (err instanceof LlmgwError && err.code === "STORAGE_FULL");
}

/** The database file is not a database, or damaged. */
export function isStoreCorrupt(err: unknown): boolean {
  const code = codeOf(err);
  return code !== undefined && (CORRUPT.has(code) || code.startsWith("SQLITE_CORRUPT") || code.startsWith("SQLITE_IOERR"));
}

export function storageFull(what: string, advice = "reading and deleting files still work, delete files to make room", retryAfterS = 30): LlmgwError {
  return new LlmgwError("STORAGE_FULL", `${what}: the disk under data_dir is full; ${advice}`, { retryAfterS });
}

/** A storage failure as the client should see it (STORAGE_FULL, JOBS_UNAVAILABLE), or the error as it was. */
export function asStorageError(err: unknown, what: string): unknown {
  if (err instanceof LlmgwError) return err;
  if (isStorageFull(err)) return storageFull(what);
  if (isStoreCorrupt(err)) {
    return new LlmgwError(
      "JOBS_UNAVAILABLE",
      `the batch store in data_dir cannot be read (${err instanceof Error ? err.message : String(err)}); see the gateway's log`,
      { retryAfterS: 60 },
    );
  }
  return err;
}
