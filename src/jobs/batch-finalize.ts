/** The end of a batch: write its output and error files, then enter the final status (through finalizing on the way to completed). */
import { renderBatchFiles, type BatchEnd } from "./batch-output.ts";
import { batchFileId } from "./job-ids.ts";
import type { Batch, BatchStatus } from "./job-types.ts";
import type { JobsStore } from "./jobs-store.ts";

/**
 * `from` are the statuses the batch may be in. Output file ids are derived
 * from the batch id, so a gateway that dies between writing the files and the
 * final status writes the same files again rather than new ones. Returns the
 * finished batch, or undefined when another actor moved it first.
 */
export async function finalizeBatch(store: JobsStore, b: Batch, end: BatchEnd, from: readonly BatchStatus[], now: number): Promise<Batch | undefined> {
  if (end === "completed" && b.status !== "finalizing") {
    const f = await store.updateBatch(b.id, from, { status: "finalizing", finalizingAtMs: now, waitingReason: null, waitingSinceMs: null });
    if (!f) return undefined;
    from = ["finalizing"];
  }
  const files = renderBatchFiles(b.id, await store.lineOutcomes(b.id), end);
  const put = async (kind: "output" | "error", text: string, lines: number): Promise<string | null> => {
    if (lines === 0) return null;
    const id = batchFileId(b.id, kind);
    const content = new TextEncoder().encode(text);
    const filename = `${b.id}_${kind}.jsonl`;
    await store.putFile({ id, tenant: b.tenant, filename, purpose: "batch_output", bytes: content.byteLength, createdAtMs: now, endpoint: null, model: null, lineCount: lines }, content);
    return id;
  };
  const outputFileId = await put("output", files.output, files.outputLines);
  const errorFileId = await put("error", files.errors, files.errorLines);
  const stamp = end === "completed" ? { completedAtMs: now } : end === "cancelled" ? { cancelledAtMs: now } : { expiredAtMs: now };
  return store.updateBatch(b.id, from, { status: end, ...stamp, outputFileId, errorFileId, waitingReason: null, waitingSinceMs: null });
}
