/** Batch jobs through a real gateway with the real `openai` client: create from JSONL, wait for an end, and check that every line ended exactly once. */
import { expect } from "bun:test";
import OpenAI, { toFile } from "openai";
import { waitUntil } from "./processes.ts";

type Batch = Awaited<ReturnType<OpenAI["batches"]["retrieve"]>>;

export function openaiClient(api: string, key: string): OpenAI {
  return new OpenAI({ baseURL: `${api}/v1`, apiKey: key, maxRetries: 0 });
}

/** Upload `jsonl` and create a batch on `endpoint`. */
export async function createBatchFrom(
  client: OpenAI,
  jsonl: string,
  endpoint: "/v1/chat/completions" | "/v1/embeddings" = "/v1/chat/completions",
): Promise<Batch> {
  const file = await client.files.create({ file: await toFile(Buffer.from(jsonl), "input.jsonl"), purpose: "batch" });
  return client.batches.create({ input_file_id: file.id, endpoint, completion_window: "24h" });
}

/** Lines of the batch recorded so far (completed + failed). */
export async function linesDone(client: OpenAI, id: string): Promise<number> {
  const b = await client.batches.retrieve(id);
  return (b.request_counts?.completed ?? 0) + (b.request_counts?.failed ?? 0);
}

/** Wait until the batch is in a final status. */
export function batchEnded(client: OpenAI, id: string, timeoutMs = 90_000): Promise<Batch> {
  return waitUntil(
    async () => {
      const b = await client.batches.retrieve(id);
      return ["completed", "failed", "cancelled", "expired"].includes(b.status) ? b : undefined;
    },
    { timeoutMs, intervalMs: 100, what: `batch ${id} to end` },
  );
}

interface OutputLine {
  custom_id: string;
  response: { status_code: number } | null;
  error: { code: string } | null;
}

async function fileLines(client: OpenAI, id: string | null | undefined): Promise<OutputLine[]> {
  if (!id) return [];
  const text = await (await client.files.content(id)).text();
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as OutputLine);
}

/**
 * Every custom_id `req-0` … `req-(n-1)` is in the output or the error file
 * exactly once (nothing lost, nothing twice); returns both files' lines.
 */
export async function expectEachLineEndedOnce(client: OpenAI, b: Batch, n: number): Promise<{ output: OutputLine[]; errors: OutputLine[] }> {
  const output = await fileLines(client, b.output_file_id);
  const errors = await fileLines(client, b.error_file_id);
  const ids = [...output, ...errors].map((l) => l.custom_id);
  expect(ids.length).toBe(n);
  expect(new Set(ids)).toEqual(new Set(Array.from({ length: n }, (_, i) => `req-${i}`)));
  expect(b.request_counts).toEqual({ total: n, completed: output.length, failed: errors.length });
  return { output, errors };
}
