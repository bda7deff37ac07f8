/**
 * The Azure LLM inference trace (2023) as CSV: a header row naming
 * TIMESTAMP, ContextTokens and GeneratedTokens (in any order, other columns
 * ignored), then one request a row. TIMESTAMP is a wall-clock time without a
 * zone (`2023-11-16 18:15:46.6805900`, .NET's 100 ns digits); only the
 * differences matter, so it is read as UTC. The published files end lines
 * with CRLF; any RFC 4180 CSV is read (./csv.ts: quoted fields, a BOM). Pure.
 */
import { CsvError, type CsvRecord, parseCsv } from "./csv.ts";
import { normaliseArrivals, spanOf, type Trace, TraceFormatError, type TraceRequest } from "./trace.ts";

const TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?$/;

/** Milliseconds (with the fraction the timestamp carries) since the epoch, for a zone-less wall-clock time; NaN when malformed. */
export function azureTimestampMs(text: string): number {
  const m = TIMESTAMP.exec(text.trim());
  if (!m) return NaN;
  const [, y, mo, d, h, mi, s, frac = ""] = m;
  const whole = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s));
  // Date.UTC rolls invalid dates over (Feb 30 → Mar 2); a trace with one is broken.
  const back = new Date(whole);
  if (back.getUTCDate() !== Number(d) || back.getUTCHours() !== Number(h) || back.getUTCMinutes() !== Number(mi)) return NaN;
  return whole + (frac === "" ? 0 : Number(`0.${frac}`) * 1000);
}

function tokenCount(field: string | undefined, min: number): number {
  const t = field?.trim() ?? "";
  if (!/^\d+$/.test(t)) return NaN;
  const n = Number(t);
  return n >= min ? n : NaN;
}

export function parseAzureCsv(text: string, source = "Azure trace"): Trace {
  let rows: CsvRecord[];
  try {
    rows = parseCsv(text);
  } catch (err) {
    if (err instanceof CsvError) throw new TraceFormatError(source, err.line, err.detail);
    throw err;
  }
  const header = (rows[0]?.fields ?? []).map((h) => h.trim());
  const col = (name: string) => header.indexOf(name);
  const iTime = col("TIMESTAMP");
  const iIn = col("ContextTokens");
  const iOut = col("GeneratedTokens");
  if (iTime < 0 || iIn < 0 || iOut < 0) {
    throw new TraceFormatError(
      source,
      rows[0]?.line ?? 1,
      `expected a header with TIMESTAMP, ContextTokens and GeneratedTokens, got '${header.join(",").slice(0, 120)}'`,
    );
  }
  const requests: TraceRequest[] = [];
  for (const { line, fields: f } of rows.slice(1)) {
    if (f.length !== header.length) throw new TraceFormatError(source, line, `expected ${header.length} fields, got ${f.length}`);
    const atMs = azureTimestampMs(f[iTime]!);
    if (Number.isNaN(atMs)) throw new TraceFormatError(source, line, `TIMESTAMP: expected 'YYYY-MM-DD HH:MM:SS[.fraction]', got '${f[iTime]}'`);
    // A prompt has at least one token; so does an answer the engine is told to generate.
    const inputTokens = tokenCount(f[iIn], 1);
    if (Number.isNaN(inputTokens)) throw new TraceFormatError(source, line, `ContextTokens: expected an integer ≥ 1, got '${f[iIn]}'`);
    const outputTokens = tokenCount(f[iOut], 1);
    if (Number.isNaN(outputTokens)) throw new TraceFormatError(source, line, `GeneratedTokens: expected an integer ≥ 1, got '${f[iOut]}'`);
    requests.push({ atMs, inputTokens, outputTokens });
  }
  if (requests.length === 0) throw new TraceFormatError(source, 0, "no requests after the header");
  const sorted = normaliseArrivals(requests);
  return { name: source, format: "azure-csv", requests: sorted, spanMs: spanOf(sorted) };
}
