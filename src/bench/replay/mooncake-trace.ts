/**
 * The Mooncake traces (FAST 2025) as JSON lines: `timestamp` (ms from the
 * trace start), `input_length`, `output_length` (tokens) and `hash_ids`, one
 * remapped prefix-block hash per 512-token block of the prompt, the last
 * block possibly partial — so exactly ⌈input_length / 512⌉ ids. A line that
 * breaks that rule is refused: its prefix sharing could not be replayed as
 * recorded. Pure.
 */
import { MOONCAKE_BLOCK_TOKENS, normaliseArrivals, spanOf, type Trace, TraceFormatError, type TraceRequest } from "./trace.ts";

function isCount(v: unknown, min: number): v is number {
  return typeof v === "number" && Number.isInteger(v) && v >= min;
}

export function parseMooncakeJsonl(text: string, source = "Mooncake trace"): Trace {
  const requests: TraceRequest[] = [];
  const lines = text.split("\n");
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (line === "") continue;
    const fail = (detail: string): never => {
      throw new TraceFormatError(source, n + 1, detail);
    };
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch (err) {
      fail(`not JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    if (typeof v !== "object" || v === null || Array.isArray(v)) return fail("expected a JSON object");
    const o = v as Record<string, unknown>;
    if (typeof o.timestamp !== "number" || !Number.isFinite(o.timestamp) || o.timestamp < 0)
      fail(`timestamp: expected ms ≥ 0, got ${JSON.stringify(o.timestamp)}`);
    if (!isCount(o.input_length, 1)) fail(`input_length: expected an integer ≥ 1, got ${JSON.stringify(o.input_length)}`);
    if (!isCount(o.output_length, 1)) fail(`output_length: expected an integer ≥ 1, got ${JSON.stringify(o.output_length)}`);
    const ids = o.hash_ids;
    if (!Array.isArray(ids) || !ids.every((h) => isCount(h, 0))) return fail("hash_ids: expected a list of integers ≥ 0");
    const input = o.input_length as number;
    const blocks = Math.ceil(input / MOONCAKE_BLOCK_TOKENS);
    if (ids.length !== blocks) fail(`hash_ids: ${ids.length} ids for input_length ${input}; expected ${blocks} (one per ${MOONCAKE_BLOCK_TOKENS}-token block)`);
    requests.push({ atMs: o.timestamp as number, inputTokens: input, outputTokens: o.output_length as number, blockIds: ids as number[] });
  }
  if (requests.length === 0) throw new TraceFormatError(source, 0, "no requests");
  const sorted = normaliseArrivals(requests);
  return { name: source, format: "mooncake-jsonl", requests: sorted, spanMs: spanOf(sorted) };
}
