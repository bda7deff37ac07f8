/**
 * The end of a batch: write its output and error files, then enter the final
 * status (through finalizing on the way to completed). The files are written
 * as the lines are read, a page at a time, straight to storage: a batch of
 * any size costs a page of memory, and the event loop gets a turn between
 * pages.
 */
import { type BatchEnd, renderOutcome } from "./batch-output.ts";
import { batchFileId } from "./job-ids.ts";
import type { Batch, BatchStatus } from "./job-types.ts";
import type { ContentWriter, JobsStore } from "./jobs-store.ts";

/** Lines read per page (and rendered into one write per file). */
const PAGE_LINES = 256;

interface OutFile {
  kind: "output" | "error";
  writer: ContentWriter | undefined;
  lines: number;
}

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
  const files: Record<"output" | "error", OutFile> = {
    output: { kind: "output", writer: undefined, lines: 0 },
    error: { kind: "error", writer: undefined, lines: 0 },
  };
  const encoder = new TextEncoder();
  try {
    for (let after = 0; ; ) {
      const page = await store.lineOutcomes(b.id, after, PAGE_LINES);
      if (page.length === 0) break;
      const text: Record<"output" | "error", string> = { output: "", error: "" };
      for (const o of page) {
        const { kind, line } = renderOutcome(b.id, o, end);
        text[kind] += line;
        files[kind].lines++;
      }
      for (const f of Object.values(files)) {
        if (text[f.kind] === "") continue;
        f.writer ??= await store.openContent(batchFileId(b.id, f.kind));
        await f.writer.write(encoder.encode(text[f.kind]));
      }
      after = page.at(-1)!.lineNo;
      await new Promise<void>((r) => setImmediate(r));
    }
    const put = async (f: OutFile): Promise<string | null> => {
      if (f.writer === undefined) return null;
      const id = batchFileId(b.id, f.kind);
      const filename = `${b.id}_${f.kind}.jsonl`;
      await store.putFile(
        { id, tenant: b.tenant, filename, purpose: "batch_output", bytes: f.writer.bytes, createdAtMs: now, endpoint: null, model: null, lineCount: f.lines },
        f.writer,
      );
      f.writer = undefined;
      return id;
    };
    const outputFileId = await put(files.output);
    const errorFileId = await put(files.error);
    const stamp = end === "completed" ? { completedAtMs: now } : end === "cancelled" ? { cancelledAtMs: now } : { expiredAtMs: now };
    return await store.updateBatch(b.id, from, { status: end, ...stamp, outputFileId, errorFileId, waitingReason: null, waitingSinceMs: null });
  } finally {
    for (const f of Object.values(files)) await f.writer?.abort();
  }
}
