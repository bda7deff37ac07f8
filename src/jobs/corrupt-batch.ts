/** A batch whose stored record cannot be read, as the API shows it: failed, saying so, with what the store still knows (its id and tenant). */
import { type BatchDoc, newBatchDoc } from "./job-types.ts";

const CORRUPT_RECORD_CODE = "batch_record_corrupt";

export function corruptBatch(id: string, tenant: string, err: unknown, nowMs: number): BatchDoc {
  const why = err instanceof Error ? err.message : String(err);
  return {
    ...newBatchDoc({
      id,
      tenant,
      endpoint: "/v1/chat/completions",
      model: null,
      inputFileId: "",
      completionWindow: "24h",
      createdAtMs: nowMs,
      expiresAtMs: nowMs,
      metadata: null,
    }),
    status: "failed",
    failedAtMs: nowMs,
    errors: [
      { code: CORRUPT_RECORD_CODE, message: `The batch's stored record cannot be read (${why}); its lines were not run further.`, param: null, line: null },
    ],
  };
}
