/**
 * Validation of a batch input file (OpenAI's JSONL request format) as its
 * bytes arrive: `push(chunk)` returns the lines completed by the chunk,
 * checked, and keeps only the line still open. Every error names its line,
 * and the first error refuses the whole file, so nothing partial is ever
 * stored. A line longer than `maxLineBytes` or nested deeper than
 * `maxDepth` is refused before it is parsed: JSON.parse and JSON.stringify
 * recurse, and a line nested 100,000 deep would overflow the stack.
 */
import { LlmgwError } from "../shared/errors.ts";
import { BATCH_ENDPOINTS, isBatchEndpoint, type BatchEndpoint, type BatchLine } from "./job-types.ts";

export interface BatchInputRules {
  maxLines: number;
  /** Whether the gateway serves this model (a configured or discovered name or alias). */
  knownModel: (name: string) => boolean;
  /** Longest line, in bytes (batch.max_line_bytes). */
  maxLineBytes: number;
  /** Deepest nesting of objects and arrays in a line (batch.max_line_depth). */
  maxDepth: number;
  /** Whether the lines' bodies are wanted (creating a batch) or only checked (an upload): an upload then makes no copy of them. */
  bodies?: boolean;
}

export interface ParsedBatchInput {
  /** The one endpoint every line targets. */
  endpoint: BatchEndpoint;
  /** The one model every line names (OpenAI: a batch file holds requests for one model). */
  model: string;
  lineCount: number;
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

/** The deepest nesting of `[` and `{` outside strings, stopping as soon as it passes `max` (a linear scan, no recursion). */
export function exceedsDepth(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped byte
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** Splits and checks a JSONL input file chunk by chunk. */
export class BatchInputValidator {
  readonly #rules: BatchInputRules;
  readonly #firstLineOf = new Map<string, number>();
  #pending: Uint8Array[] = [];
  #pendingBytes = 0;
  #lineNo = 0;
  #lines = 0;
  #endpoint: BatchEndpoint | undefined;
  #model: string | undefined;

  constructor(rules: BatchInputRules) {
    this.#rules = rules;
  }

  /** Bytes of the line still open (held until its newline arrives). */
  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  /** The lines this chunk completes, checked; throws INVALID_BATCH_LINE (400) naming the first bad one. */
  push(chunk: Uint8Array): BatchLine[] {
    const out: BatchLine[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      if (nl < 0) break;
      const piece = chunk.subarray(start, nl);
      const whole = this.#pending.length === 0 ? piece : Buffer.concat([...this.#pending, piece]);
      this.#pending = [];
      this.#pendingBytes = 0;
      this.#guardLength(whole.byteLength);
      out.push(this.#line(whole));
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.#pendingBytes += rest.byteLength;
      this.#guardLength(this.#pendingBytes);
      // A copy: the caller may reuse its buffer.
      this.#pending.push(new Uint8Array(rest));
    }
    return out;
  }

  /** The file is over: its last line (with no final newline), and what the whole file holds. */
  end(): { lines: BatchLine[]; input: ParsedBatchInput } {
    const lines = this.#pendingBytes > 0 ? [this.#line(Buffer.concat(this.#pending))] : [];
    this.#pending = [];
    this.#pendingBytes = 0;
    if (this.#endpoint === undefined || this.#model === undefined) {
      throw new LlmgwError("INVALID_BATCH_LINE", "the file holds no requests (expected JSONL: one request object per line)", { param: "file" });
    }
    return { lines, input: { endpoint: this.#endpoint, model: this.#model, lineCount: this.#lines } };
  }

  #guardLength(bytes: number): void {
    if (bytes > this.#rules.maxLineBytes) throw lineError(this.#lineNo + 1, `longer than ${this.#rules.maxLineBytes} bytes (batch.max_line_bytes)`);
  }

  #line(bytes: Uint8Array): BatchLine {
    const lineNo = ++this.#lineNo;
    let raw = bytes;
    if (raw.at(-1) === 0x0d) raw = raw.subarray(0, raw.length - 1);
    // A UTF-8 byte-order mark before the first line is tolerated (editors on Windows write one).
    if (lineNo === 1 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf) raw = raw.subarray(3);
    let text: string;
    try {
      text = utf8.decode(raw);
    } catch {
      throw lineError(lineNo, "not valid UTF-8 text");
    }
    if (text.trim() === "") throw lineError(lineNo, "empty line; expected one JSON request object per line");
    if (this.#lines >= this.#rules.maxLines) throw lineError(lineNo, `more than ${this.#rules.maxLines} requests in one file`);
    if (exceedsDepth(raw, this.#rules.maxDepth)) throw lineError(lineNo, `nested deeper than ${this.#rules.maxDepth} levels (batch.max_line_depth)`);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (err) {
      throw lineError(lineNo, `not valid JSON (${err instanceof Error ? err.message : String(err)})`);
    }
    if (!isObject(parsed)) throw lineError(lineNo, "expected a JSON object with custom_id, method, url and body");
    const { custom_id: customId, method, url, body } = parsed;
    if (typeof customId !== "string" || customId.length === 0) throw lineError(lineNo, "custom_id must be a non-empty string");
    const first = this.#firstLineOf.get(customId);
    if (first !== undefined) throw lineError(lineNo, `duplicate custom_id '${customId}' (first on line ${first})`);
    this.#firstLineOf.set(customId, lineNo);
    if (method !== "POST") throw lineError(lineNo, 'method must be "POST"');
    if (typeof url !== "string" || !isBatchEndpoint(url)) throw lineError(lineNo, `url must be one of ${BATCH_ENDPOINTS.join(", ")}`);
    if (this.#endpoint !== undefined && url !== this.#endpoint) {
      throw lineError(lineNo, `url '${url}' differs from line 1's '${this.#endpoint}': a batch runs against one endpoint`);
    }
    this.#endpoint = url;
    if (!isObject(body)) throw lineError(lineNo, "body must be a JSON object");
    if (typeof body.model !== "string" || body.model.length === 0) throw lineError(lineNo, "body.model must be a non-empty string");
    if (!this.#rules.knownModel(body.model)) throw lineError(lineNo, `unknown model '${body.model}'`);
    if (this.#model !== undefined && body.model !== this.#model) {
      throw lineError(lineNo, `model '${body.model}' differs from line 1's '${this.#model}': a batch file holds requests for one model`);
    }
    this.#model = body.model;
    if (body.stream === true) throw lineError(lineNo, "body.stream must be false or absent: batch requests do not stream");
    const required = REQUIRED_FIELD[url];
    if (!required.test(body[required.key])) throw lineError(lineNo, `body.${required.key} must be ${required.expected}`);
    this.#lines++;
    return { lineNo: this.#lines, customId, method: "POST", url, body: this.#rules.bodies === false ? "" : JSON.stringify(body) };
  }
}

/** A whole input file at once (tests, small files): its lines and what it holds. */
export function parseBatchInput(bytes: Uint8Array, rules: BatchInputRules): ParsedBatchInput & { lines: BatchLine[] } {
  const v = new BatchInputValidator(rules);
  const lines = v.push(bytes);
  const end = v.end();
  return { ...end.input, lines: [...lines, ...end.lines] };
}
