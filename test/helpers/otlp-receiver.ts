/**
 * An OTLP/HTTP trace receiver on loopback for tests: it accepts
 * `POST /v1/traces` in both encodings and decodes each with the official
 * definitions — protobuf against the opentelemetry-proto .proto files
 * vendored in test/fixtures/otlp-proto (read by a small proto3 reader below:
 * no protobuf library is installed), JSON as the OTLP JSON mapping — into
 * one shape, so a test asserts the same spans whichever encoding was sent.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Server } from "bun";

const PROTO_ROOT = join(import.meta.dir, "..", "fixtures", "otlp-proto");
const PROTO_FILES = [
  "opentelemetry/proto/common/v1/common.proto",
  "opentelemetry/proto/resource/v1/resource.proto",
  "opentelemetry/proto/trace/v1/trace.proto",
  "opentelemetry/proto/collector/trace/v1/trace_service.proto",
];

interface FieldDef {
  name: string;
  type: string;
  repeated: boolean;
}
type MessageDef = Map<number, FieldDef>;

/** Messages (by full name) and enums of the .proto files: the subset of proto3 the OTLP files use (messages, nested ones, enums, oneof, repeated, reserved, options). */
function readProtos(): { messages: Map<string, MessageDef>; enums: Set<string> } {
  const messages = new Map<string, MessageDef>();
  const enums = new Set<string>();
  for (const file of PROTO_FILES) {
    const text = readFileSync(join(PROTO_ROOT, file), "utf8")
      .replace(/\/\*[\s\S]*?\*\//g, "")
      .replace(/\/\/.*$/gm, "");
    const tokens = text.match(/[A-Za-z_][\w.]*|\d+|"[^"]*"|[{}=;<>,[\]()]/g) ?? [];
    let i = 0;
    let pkg = "";
    const scope: { kind: "message" | "enum" | "oneof" | "service" | "other"; name: string }[] = [];
    const skipStatement = () => {
      while (i < tokens.length && tokens[i] !== ";") i++;
      i++;
    };
    while (i < tokens.length) {
      const t = tokens[i]!;
      if (t === "}" || t === ";") {
        if (t === "}") scope.pop();
        i++;
        continue;
      }
      if (t === "syntax" || t === "import" || t === "option" || t === "reserved") {
        skipStatement();
        continue;
      }
      if (t === "package") {
        pkg = tokens[i + 1]!;
        skipStatement();
        continue;
      }
      if (t === "message" || t === "enum" || t === "oneof" || t === "service") {
        const name = tokens[i + 1]!;
        const outer = scope.filter((s) => s.kind === "message").map((s) => s.name);
        if (t === "message") messages.set([pkg, ...outer, name].join("."), new Map());
        if (t === "enum") enums.add([pkg, ...outer, name].join("."));
        scope.push({ kind: t, name });
        i += 3; // keyword, name, {
        if (t === "service") {
          // rpc lines: skip to the service's closing brace.
          let depth = 1;
          while (depth > 0) {
            if (tokens[i] === "{") depth++;
            if (tokens[i] === "}") depth--;
            i++;
          }
          scope.pop();
        }
        continue;
      }
      const top = scope[scope.length - 1];
      if (top?.kind === "enum") {
        skipStatement();
        continue;
      }
      // A field: [repeated|optional] Type name = N [options];
      let repeated = false;
      if (t === "repeated" || t === "optional") {
        repeated = t === "repeated";
        i++;
      }
      const type = tokens[i]!;
      const name = tokens[i + 1]!;
      const number = Number(tokens[i + 3]);
      const outer = scope.filter((s) => s.kind === "message").map((s) => s.name);
      messages.get([pkg, ...outer].join("."))!.set(number, { name, type: qualify(type, pkg, outer), repeated });
      skipStatement();
    }
  }
  // Resolve relative type names against the messages and enums now known.
  for (const def of messages.values()) for (const f of def.values()) f.type = resolveType(f.type, messages, enums);
  return { messages, enums };
}

const SCALARS = new Set([
  "string",
  "bytes",
  "bool",
  "int32",
  "int64",
  "uint32",
  "uint64",
  "sint32",
  "sint64",
  "fixed32",
  "fixed64",
  "sfixed32",
  "sfixed64",
  "double",
  "float",
]);

/** Candidate full names for `type` used inside `outer` of `pkg` ("|"-separated, innermost scope first). */
function qualify(type: string, pkg: string, outer: string[]): string {
  if (SCALARS.has(type)) return type;
  const candidates: string[] = [];
  for (let n = outer.length; n >= 0; n--) candidates.push([pkg, ...outer.slice(0, n), type].join("."));
  candidates.push(type);
  return candidates.join("|");
}

function resolveType(type: string, messages: Map<string, MessageDef>, enums: Set<string>): string {
  if (SCALARS.has(type)) return type;
  for (const c of type.split("|")) if (messages.has(c) || enums.has(c)) return enums.has(c) ? `enum:${c}` : c;
  throw new Error(`unresolved proto type ${type}`);
}

const { messages: MESSAGES } = readProtos();

/** OTLP's JSON mapping: field names in lowerCamelCase, trace and span ids as hex, other bytes as base64, 64-bit integers as strings, enums as numbers. */
const camel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const HEX_ID_FIELDS = new Set(["trace_id", "span_id", "parent_span_id"]);

class Reader {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}
  varint(): bigint {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = this.buf[this.pos++];
      if (b === undefined) throw new Error("truncated varint");
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  }
  bytes(): Uint8Array {
    const n = Number(this.varint());
    const out = this.buf.subarray(this.pos, this.pos + n);
    if (out.length !== n) throw new Error("truncated bytes");
    this.pos += n;
    return out;
  }
  fixed(n: 4 | 8): DataView {
    const v = new DataView(this.buf.buffer, this.buf.byteOffset + this.pos, n);
    this.pos += n;
    return v;
  }
}

function scalar(type: string, wire: number, r: Reader, fieldName: string): unknown {
  switch (type) {
    case "string":
      return new TextDecoder().decode(r.bytes());
    case "bytes": {
      const b = r.bytes();
      return HEX_ID_FIELDS.has(fieldName) ? Buffer.from(b).toString("hex") : Buffer.from(b).toString("base64");
    }
    case "bool":
      return r.varint() !== 0n;
    case "int32":
    case "uint32":
      return Number(BigInt.asIntN(32, r.varint()));
    case "int64":
      return BigInt.asIntN(64, r.varint()).toString();
    case "uint64":
      return r.varint().toString();
    case "fixed64":
      return r.fixed(8).getBigUint64(0, true).toString();
    case "sfixed64":
      return r.fixed(8).getBigInt64(0, true).toString();
    case "fixed32":
      return r.fixed(4).getUint32(0, true);
    case "sfixed32":
      return r.fixed(4).getInt32(0, true);
    case "double":
      return r.fixed(8).getFloat64(0, true);
    case "float":
      return r.fixed(4).getFloat32(0, true);
    default:
      if (type.startsWith("enum:")) return Number(r.varint());
      throw new Error(`unhandled scalar ${type} (wire ${wire})`);
  }
}

function skip(wire: number, r: Reader): void {
  if (wire === 0) r.varint();
  else if (wire === 1) r.pos += 8;
  else if (wire === 2) r.bytes();
  else if (wire === 5) r.pos += 4;
  else throw new Error(`wire type ${wire}`);
}

/** Decode `buf` as the message `type` (a full name) into its OTLP JSON form. */
export function decodeProto(type: string, buf: Uint8Array): Record<string, unknown> {
  const def = MESSAGES.get(type);
  if (def === undefined) throw new Error(`unknown message ${type}`);
  const out: Record<string, unknown> = {};
  const r = new Reader(buf);
  while (r.pos < buf.length) {
    const tag = Number(r.varint());
    const number = tag >>> 3;
    const wire = tag & 7;
    const f = def.get(number);
    if (f === undefined) {
      skip(wire, r);
      continue;
    }
    const key = camel(f.name);
    const values: unknown[] = [];
    if (MESSAGES.has(f.type)) values.push(decodeProto(f.type, r.bytes()));
    else if (wire === 2 && f.type !== "string" && f.type !== "bytes") {
      // A packed repeated scalar.
      const sub = new Reader(r.bytes());
      while (sub.pos < sub.buf.length) values.push(scalar(f.type, wire, sub, f.name));
    } else values.push(scalar(f.type, wire, r, f.name));
    if (f.repeated) out[key] = [...((out[key] as unknown[] | undefined) ?? []), ...values];
    else out[key] = values[0];
  }
  return out;
}

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  attributes: Record<string, unknown>;
  events: string[];
  status: { code?: number; message?: string };
  serviceName: unknown;
}

interface AnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: AnyValue[] };
}

function anyValue(v: AnyValue | undefined): unknown {
  if (v === undefined) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(anyValue);
  return undefined;
}

function attributesOf(list: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of (list as { key: string; value?: AnyValue }[] | undefined) ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

/** The spans of one ExportTraceServiceRequest (OTLP JSON form), flattened. */
function spansOf(request: Record<string, unknown>): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of (request.resourceSpans as Record<string, unknown>[] | undefined) ?? []) {
    const resource = attributesOf((rs.resource as { attributes?: unknown } | undefined)?.attributes);
    for (const ss of (rs.scopeSpans as Record<string, unknown>[] | undefined) ?? []) {
      for (const s of (ss.spans as Record<string, unknown>[] | undefined) ?? []) {
        out.push({
          traceId: String(s.traceId ?? "").toLowerCase(),
          spanId: String(s.spanId ?? "").toLowerCase(),
          parentSpanId: String(s.parentSpanId ?? "").toLowerCase(),
          name: String(s.name),
          kind: Number(s.kind ?? 0),
          attributes: attributesOf(s.attributes),
          events: ((s.events as { name: string }[] | undefined) ?? []).map((e) => e.name),
          status: (s.status as ReceivedSpan["status"] | undefined) ?? {},
          serviceName: resource["service.name"],
        });
      }
    }
  }
  return out;
}

export interface OtlpReceiver {
  server: Server<undefined>;
  /** Base URL (OTEL_EXPORTER_OTLP_ENDPOINT's form: /v1/traces is appended). */
  url: string;
  /** Each export request: its content type, headers and spans. */
  requests: { contentType: string; headers: Headers; spans: ReceivedSpan[] }[];
  spans(): ReceivedSpan[];
}

export function startOtlpReceiver(): OtlpReceiver {
  const requests: OtlpReceiver["requests"] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (new URL(req.url).pathname !== "/v1/traces" || req.method !== "POST") return new Response("not found", { status: 404 });
      const contentType = req.headers.get("content-type") ?? "";
      const body = new Uint8Array(await req.arrayBuffer());
      let decoded: Record<string, unknown>;
      if (contentType.startsWith("application/x-protobuf")) {
        decoded = decodeProto("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest", body);
        requests.push({ contentType, headers: req.headers, spans: spansOf(decoded) });
        return new Response(new Uint8Array(0), { headers: { "content-type": "application/x-protobuf" } });
      }
      if (contentType.startsWith("application/json")) {
        decoded = JSON.parse(new TextDecoder().decode(body)) as Record<string, unknown>;
        requests.push({ contentType, headers: req.headers, spans: spansOf(decoded) });
        return Response.json({});
      }
      return new Response("unsupported content type", { status: 415 });
    },
  });
  return { server, url: `http://127.0.0.1:${server.port}`, requests, spans: () => requests.flatMap((r) => r.spans) };
}
