/** Ids in OpenAI's forms: `file-…`, `batch_…`, `batch_req_…`; output file and line ids are derived from the batch so a re-run writes the same ones. */
import { createHash, randomBytes } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** `n` random base-62 characters (the slight modulo bias is irrelevant: ids need uniqueness, not uniformity). */
function random62(n: number): string {
  const bytes = randomBytes(n);
  let out = "";
  for (const b of bytes) out += ALPHABET[b % 62];
  return out;
}

function digest62(text: string, n: number): string {
  const bytes = createHash("sha256").update(text).digest();
  let out = "";
  for (let i = 0; i < n; i++) out += ALPHABET[bytes[i]! % 62];
  return out;
}

export function newFileId(): string {
  return `file-${random62(24)}`;
}

export function newBatchId(): string {
  return `batch_${random62(32)}`;
}

/** The output or error file of a batch: deterministic, so finalising twice (after a crash) replaces rather than duplicates. */
export function batchFileId(batchId: string, kind: "output" | "error"): string {
  return `file-${digest62(`${batchId}\u0000${kind}`, 24)}`;
}

/** The `id` of a line in the output files. */
export function batchRequestId(batchId: string, lineNo: number): string {
  return `batch_req_${digest62(`${batchId}\u0000${lineNo}`, 32)}`;
}
