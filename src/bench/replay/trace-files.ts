/**
 * The traces shipped in bench/traces/ by name, and any other trace file by
 * path: read it, tell its format (by extension, else by its first
 * character), parse it.
 */
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { REPO_ROOT } from "../../shared/llmgw-child.ts";
import { MAX_TRACE_FILE_BYTES, readInputFile } from "../input-file.ts";
import { parseAzureCsv } from "./azure-trace.ts";
import { parseMooncakeJsonl } from "./mooncake-trace.ts";
import type { Trace } from "./trace.ts";

export const TRACES_DIR = join(REPO_ROOT, "bench", "traces");

/** `--trace NAME` → file in bench/traces/ (licences and sources in its README). */
export const SHIPPED_TRACES: Readonly<Record<string, string>> = Object.freeze({
  "azure-conv": "azure-llm-2023-conv.csv",
  "azure-code": "azure-llm-2023-code.csv",
  "mooncake-conversation": "mooncake-conversation.jsonl",
  "mooncake-synthetic": "mooncake-synthetic.jsonl",
});

/** The file a `--trace` value names: a shipped trace's name, else a path; undefined when neither exists. */
export function tracePath(nameOrPath: string): string | undefined {
  const shipped = SHIPPED_TRACES[nameOrPath];
  if (shipped !== undefined) return join(TRACES_DIR, shipped);
  const path = resolve(nameOrPath);
  return existsSync(path) ? path : undefined;
}

/** Parse trace text: Mooncake JSON lines (.jsonl/.json, or text starting with '{'), otherwise Azure CSV. */
export function parseTraceText(text: string, source: string): Trace {
  const ext = source.toLowerCase();
  const jsonl = ext.endsWith(".jsonl") || ext.endsWith(".json") || (!ext.endsWith(".csv") && text.trimStart().startsWith("{"));
  return jsonl ? parseMooncakeJsonl(text, source) : parseAzureCsv(text, source);
}

/** Load a trace by shipped name or path (the caller has checked tracePath); a UsageError for what is not a regular file of at most MAX_TRACE_FILE_BYTES. */
export function loadTrace(nameOrPath: string, path: string): Trace {
  const trace = parseTraceText(readInputFile(path, MAX_TRACE_FILE_BYTES, "--trace"), path);
  return { ...trace, name: SHIPPED_TRACES[nameOrPath] !== undefined ? nameOrPath : path };
}
