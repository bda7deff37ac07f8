/**
 * Validation of a batch input file (OpenAI's JSONL request format), line by
 * line: every error names its line, and the first error refuses the whole
 * file, so nothing partial is ever stored.
 */
import { LlmgwError } from "../shared/errors.ts";
import { BATCH_ENDPOINTS, isBatchEndpoint, type BatchEndpoint, type BatchLine } from "./job-types.ts";

export interface BatchInputRules {
  maxLines: number;
  /** Whether the gateway serves this model (a configured or discovered name or alias). */
  knownModel: (name: string) => boolean;
}

export interface ParsedBatchInput {
  /** The one endpoint every line targets. */
  endpoint: BatchEndpoint;
  /** The one model every line names (OpenAI: a batch file holds requests for one model). */
  model: string;
  lines: BatchLine[];
}

/** What each endpoint's body must carry besides `model` (the gateway's own request checks decide the rest when the line runs). */
const REQUIRED_FIELD: Record<BatchEndpoint, { key: string; test: (v: unknown) => boolean; expected: string }> = {
  "/v1/chat/completions": { key: "messages", test: (v) => Array.isArray(v) && v.length > 0, expected: "a non-empty array" },
  "/v1/completions": { key: "prompt", test: (v) => typeof v === "string" || Array.isArray(v), expected: "a string or an array" },
  "/v1/embeddings": { key: "input", test: (v) => typeof v === "string" || Array.isArray(v), expected: "a string or an array" },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

function lineError(lineNo: number, message: string): LlmgwError {
  return new LlmgwError("INVALID_BATCH_LINE", `line ${lineNo}: ${message}`, { param: "file" });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Split on LF (a CR before it is dropped); a final newline does not start another line. */
function* splitLines(bytes: Uint8Array): Generator<{ lineNo: number; text: string }> {
  let start = 0;
  let lineNo = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end < 0) end = bytes.length;
    lineNo++;
    let raw = bytes.subarray(start, end);
    if (raw.at(-1) === 0x0d) raw = raw.subarray(0, raw.length - 1);
    // A UTF-8 byte-order mark before the first line is tolerated (editors on Windows write one).
    if (lineNo === 1 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) raw = raw.subarray(3);
    let text: string;
    try {
      text = utf8.decode(raw);
    } catch {
      throw lineError(lineNo, "not valid UTF-8 text");
    }
    yield { lineNo, text };
    start = end + 1;
  }
}

/** Parse and check a whole input file; throws INVALID_BATCH_LINE (400) naming the first bad line. */
export function parseBatchInput(bytes: Uint8Array, rules: BatchInputRules): ParsedBatchInput {
  const lines: BatchLine[] = [];
  const firstLineOf = new Map<string, number>();
  let endpoint: BatchEndpoint | undefined;
  let model: string | undefined;
  for (const { lineNo, text } of splitLines(bytes)) {
    if (text.trim() === "") throw lineError(lineNo, "empty line; expected one JSON request object per line");
    if (lines.length >= rules.maxLines) throw lineError(lineNo, `more than ${rules.maxLines} requests in one file`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw lineError(lineNo, `not valid JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    if (!isObject(parsed)) throw lineError(lineNo, "expected a JSON object with custom_id, method, url and body");
    const { custom_id: customId, method, url, body } = parsed;
    if (typeof customId !== "string" || customId.length === 0) throw lineError(lineNo, "custom_id must be a non-empty string");
    const first = firstLineOf.get(customId);
    if (first !== undefined) throw lineError(lineNo, `duplicate custom_id '${customId}' (first on line ${first})`);
    firstLineOf.set(customId, lineNo);
    if (method !== "POST") throw lineError(lineNo, "method must be \"POST\"");
    if (typeof url !== "string" || !isBatchEndpoint(url)) {
      throw lineError(lineNo, `url must be one of ${BATCH_ENDPOINTS.join(", ")}`);
    }
    if (endpoint !== undefined && url !== endpoint) {
      throw lineError(lineNo, `url '${url}' differs from line 1's '${endpoint}': a batch runs against one endpoint`);
    }
    endpoint = url;
    if (!isObject(body)) throw lineError(lineNo, "body must be a JSON object");
    if (typeof body.model !== "string" || body.model.length === 0) throw lineError(lineNo, "body.model must be a non-empty string");
    if (!rules.knownModel(body.model)) throw lineError(lineNo, `unknown model '${body.model}'`);
    if (model !== undefined && body.model !== model) {
      throw lineError(lineNo, `model '${body.model}' differs from line 1's '${model}': a batch file holds requests for one model`);
    }
    model = body.model;
    if (body.stream === true) throw lineError(lineNo, "body.stream must be false or absent: batch requests do not stream");
    const required = REQUIRED_FIELD[url];
    if (!required.test(body[required.key])) throw lineError(lineNo, `body.${required.key} must be ${required.expected}`);
    lines.push({ lineNo, customId, method: "POST", url, body: JSON.stringify(body) });
  }
  if (endpoint === undefined || model === undefined) {
    throw new LlmgwError("INVALID_BATCH_LINE", "the file holds no requests (expected JSONL: one request object per line)", { param: "file" });
  }
  return { endpoint, model, lines };
}
