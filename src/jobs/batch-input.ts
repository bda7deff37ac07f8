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
import { BATCH_ENDPOINTS, type BatchEndpoint, type BatchLine, isBatchEndpoint } from "./job-types.ts";
import { JsonLineScanner, LineKey } from "./json-line-scan.ts";

interface BatchInputRules {
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
type ValueShape = "string" | "array" | "empty-array" | "other" | "absent";

const REQUIRED_FIELD: Record<BatchEndpoint, { key: string; test: (v: ValueShape) => boolean; expected: string }> = {
  "/v1/chat/completions": { key: "messages", test: (v) => v === "array", expected: "a non-empty array" },
  "/v1/completions": { key: "prompt", test: (v) => v === "string" || v === "array" || v === "empty-array", expected: "a string or an array" },
  "/v1/embeddings": { key: "input", test: (v) => v === "string" || v === "array" || v === "empty-array", expected: "a string or an array" },
};

const utf8 = new TextDecoder("utf-8", { fatal: true });

function lineError(lineNo: number, message: string): LlmgwError {
  return new LlmgwError("INVALID_BATCH_LINE", `line ${lineNo}: ${message}`, { param: "file" });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The deepest nesting of `[` and `{` outside strings, stopping as soon as it passes `max` (a linear scan, no recursion). */
function exceedsDepth(bytes: Uint8Array, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const c = bytes[i]!;
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped byte
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

  readonly #scanner: JsonLineScanner | undefined;

  constructor(rules: BatchInputRules) {
    this.#rules = rules;
    if (rules.bodies === false) this.#scanner = new JsonLineScanner(rules.maxDepth);
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
    // An upload only checks: a plain line is checked where its bytes lie; anything else (and every fault) the slow way, which names it.
    let fields: LineFields;
    if (this.#scanner?.scan(raw)) {
      if (this.#lines >= this.#rules.maxLines) throw lineError(lineNo, `more than ${this.#rules.maxLines} requests in one file`);
      fields = scannedFields(raw, this.#scanner.spans);
    } else fields = this.#parsed(lineNo, raw);
    const { customId, method, url, body } = fields;
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
    if (body === undefined) throw lineError(lineNo, "body must be a JSON object");
    if (typeof body.model !== "string" || body.model.length === 0) throw lineError(lineNo, "body.model must be a non-empty string");
    if (!this.#rules.knownModel(body.model)) throw lineError(lineNo, `unknown model '${body.model}'`);
    if (this.#model !== undefined && body.model !== this.#model) {
      throw lineError(lineNo, `model '${body.model}' differs from line 1's '${this.#model}': a batch file holds requests for one model`);
    }
    this.#model = body.model;
    if (body.streams) throw lineError(lineNo, "body.stream must be false or absent: batch requests do not stream");
    const required = REQUIRED_FIELD[url];
    if (!required.test(body.shapeOf(required.key))) throw lineError(lineNo, `body.${required.key} must be ${required.expected}`);
    this.#lines++;
    return { lineNo: this.#lines, customId, method: "POST", url, body: fields.value === undefined ? "" : JSON.stringify(fields.value) };
  }

  /** The slow way: decoded and parsed whole; every fault a line can have is named here. */
  #parsed(lineNo: number, raw: Uint8Array): LineFields {
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
    const fields: LineFields = { customId, method, url, body: undefined, value: this.#rules.bodies === false ? undefined : body };
    if (isObject(body)) fields.body = { model: body.model, streams: body.stream === true, shapeOf: (key) => shapeOfValue(body[key]) };
    return fields;
  }
}

/** What the checks read of a line, from its parsed object or from its scanned bytes. */
interface LineFields {
  customId: unknown;
  method: unknown;
  url: unknown;
  /** undefined when the body is absent or not an object. */
  body: { model: unknown; streams: boolean; shapeOf: (key: string) => ValueShape } | undefined;
  /** The parsed body, when the caller wants it. */
  value?: unknown;
}

function shapeOfValue(v: unknown): ValueShape {
  if (typeof v === "string") return "string";
  if (Array.isArray(v)) return v.length === 0 ? "empty-array" : "array";
  return v === undefined ? "absent" : "other";
}

/** A small scanned value (a string of the few the checks read), decoded; a container is only its kind. */
function valueAt(raw: Uint8Array, spans: Int32Array, key: LineKey): unknown {
  const start = spans[2 * key]!;
  if (start < 0) return undefined;
  const first = raw[start];
  if (first === 0x7b || first === 0x5b) return first === 0x7b ? {} : [];
  return JSON.parse(utf8.decode(raw.subarray(start, spans[2 * key + 1]!)));
}

const TRUE = new TextEncoder().encode("true");

function scannedFields(raw: Uint8Array, spans: Int32Array): LineFields {
  const bodyStart = spans[2 * LineKey.Body]!;
  const fields: LineFields = {
    customId: valueAt(raw, spans, LineKey.CustomId),
    method: valueAt(raw, spans, LineKey.Method),
    url: valueAt(raw, spans, LineKey.Url),
    body: undefined,
  };
  if (bodyStart < 0 || raw[bodyStart] !== 0x7b) return fields;
  const streamStart = spans[2 * LineKey.Stream]!;
  const streams = streamStart >= 0 && spans[2 * LineKey.Stream + 1]! - streamStart === TRUE.length && TRUE.every((c, k) => raw[streamStart + k] === c);
  const shapeKeys: Record<string, LineKey> = { messages: LineKey.Messages, prompt: LineKey.Prompt, input: LineKey.Input };
  fields.body = {
    model: valueAt(raw, spans, LineKey.Model),
    streams,
    shapeOf: (key) => {
      const k = shapeKeys[key];
      const start = k === undefined ? -1 : spans[2 * k]!;
      if (start < 0) return "absent";
      const first = raw[start];
      if (first === 0x22) return "string";
      if (first !== 0x5b) return "other";
      let i = start + 1;
      while (raw[i] === 0x20 || raw[i] === 0x09 || raw[i] === 0x0a || raw[i] === 0x0d) i++;
      return raw[i] === 0x5d ? "empty-array" : "array";
    },
  };
  return fields;
}

/** A whole input file at once (tests, small files): its lines and what it holds. */
export function parseBatchInput(bytes: Uint8Array, rules: BatchInputRules): ParsedBatchInput & { lines: BatchLine[] } {
  const v = new BatchInputValidator(rules);
  const lines = v.push(bytes);
  const end = v.end();
  return { ...end.input, lines: [...lines, ...end.lines] };
}
