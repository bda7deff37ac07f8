/**
 * ZMTP 3.1 command bodies (RFC 23/ZMTP, RFC 37/ZMTP for 3.1): READY and its
 * metadata properties, ERROR, SUBSCRIBE/CANCEL, PING/PONG. Pure.
 */
import { ZmtpProtocolError } from "./errors.ts";
import { encodeCommand } from "./frames.ts";

export type ZmtpCommand =
  | { name: "READY"; properties: Map<string, Uint8Array> }
  | { name: "ERROR"; reason: string }
  | { name: "SUBSCRIBE"; topic: Uint8Array }
  | { name: "CANCEL"; topic: Uint8Array }
  | { name: "PING"; ttlDeciseconds: number; context: Uint8Array }
  | { name: "PONG"; context: Uint8Array }
  | { name: "OTHER"; rawName: string };

const MAX_PING_CONTEXT = 16;
const ascii = new TextDecoder("latin1");
const utf8 = new TextEncoder();

/** Metadata as READY carries it: name-length octet, name, 4-octet big-endian value length, value. */
export function encodeProperties(properties: ReadonlyArray<readonly [string, Uint8Array]>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const [name, value] of properties) {
    const n = utf8.encode(name);
    const head = new Uint8Array(1 + n.length + 4);
    head[0] = n.length;
    head.set(n, 1);
    new DataView(head.buffer).setUint32(1 + n.length, value.length);
    parts.push(head, value);
  }
  const out = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Parse READY's metadata; names are case-insensitive (RFC 23), so they come back lower-cased. */
export function decodeProperties(data: Uint8Array): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let at = 0;
  while (at < data.length) {
    const nameLength = data[at]!;
    if (nameLength === 0 || at + 1 + nameLength + 4 > data.length) throw new ZmtpProtocolError("protocol-violation", "malformed READY metadata");
    const name = ascii.decode(data.subarray(at + 1, at + 1 + nameLength)).toLowerCase();
    at += 1 + nameLength;
    const valueLength = view.getUint32(at);
    at += 4;
    if (at + valueLength > data.length) throw new ZmtpProtocolError("protocol-violation", "malformed READY metadata");
    out.set(name, data.subarray(at, at + valueLength));
    at += valueLength;
  }
  return out;
}

/** Parse a command frame's body: name-length octet, name, data. */
export function decodeCommand(body: Uint8Array): ZmtpCommand {
  const nameLength = body[0];
  if (nameLength === undefined || nameLength === 0 || 1 + nameLength > body.length)
    throw new ZmtpProtocolError("protocol-violation", "malformed command frame");
  const name = ascii.decode(body.subarray(1, 1 + nameLength));
  const data = body.subarray(1 + nameLength);
  switch (name) {
    case "READY":
      return { name, properties: decodeProperties(data) };
    case "ERROR": {
      const length = data[0] ?? 0;
      return { name, reason: ascii.decode(data.subarray(1, 1 + length)) };
    }
    case "SUBSCRIBE":
    case "CANCEL":
      return { name, topic: data };
    case "PING": {
      if (data.length < 2 || data.length > 2 + MAX_PING_CONTEXT) throw new ZmtpProtocolError("protocol-violation", "malformed PING");
      return { name, ttlDeciseconds: (data[0]! << 8) | data[1]!, context: data.subarray(2) };
    }
    case "PONG":
      if (data.length > MAX_PING_CONTEXT) throw new ZmtpProtocolError("protocol-violation", "malformed PONG");
      return { name, context: data };
    default:
      // RFC 23 leaves room for commands a peer does not know; they are ignored.
      return { name: "OTHER", rawName: name };
  }
}

export function readyCommand(socketType: string, identity?: Uint8Array): Uint8Array {
  const props: Array<readonly [string, Uint8Array]> = [["Socket-Type", utf8.encode(socketType)]];
  if (identity !== undefined) props.push(["Identity", identity]);
  return encodeCommand("READY", encodeProperties(props));
}

export function errorCommand(reason: string): Uint8Array {
  const r = utf8.encode(reason).subarray(0, 255);
  const data = new Uint8Array(1 + r.length);
  data[0] = r.length;
  data.set(r, 1);
  return encodeCommand("ERROR", data);
}

export function pingCommand(ttlDeciseconds: number, context: Uint8Array = new Uint8Array(0)): Uint8Array {
  const data = new Uint8Array(2 + context.length);
  const ttl = Math.max(0, Math.min(0xffff, Math.round(ttlDeciseconds)));
  data[0] = ttl >> 8;
  data[1] = ttl & 0xff;
  data.set(context, 2);
  return encodeCommand("PING", data);
}

export function pongCommand(context: Uint8Array): Uint8Array {
  return encodeCommand("PONG", context);
}
