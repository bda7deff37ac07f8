/**
 * ZMTP 3.x framing (RFC 23/ZMTP §"Framing"): a flags octet (bit 0 MORE, bit 1
 * LONG, bit 2 COMMAND), a 1-octet or 8-octet big-endian size, the body.
 * Encoding of whole messages and an incremental decoder over a ByteQueue. Pure.
 */
import type { ByteQueue } from "./byte-queue.ts";
import { ZmtpProtocolError } from "./errors.ts";

const FLAG_MORE = 0x01;
const FLAG_LONG = 0x02;
const FLAG_COMMAND = 0x04;
const SHORT_MAX = 0xff;

export interface Frame {
  /** Another frame of the same message follows (never set on a command). */
  more: boolean;
  command: boolean;
  body: Uint8Array;
}

function headerBytes(size: number): number {
  return size <= SHORT_MAX ? 2 : 9;
}

function writeHeader(out: Uint8Array, at: number, flags: number, size: number): number {
  if (size <= SHORT_MAX) {
    out[at] = flags;
    out[at + 1] = size;
    return at + 2;
  }
  out[at] = flags | FLAG_LONG;
  new DataView(out.buffer, out.byteOffset + at + 1, 8).setBigUint64(0, BigInt(size));
  return at + 9;
}

/** One multipart message as its wire bytes, ready for a single write. */
export function encodeMessage(frames: readonly Uint8Array[]): Uint8Array {
  if (frames.length === 0) throw new RangeError("a ZMTP message has at least one frame");
  let total = 0;
  for (const f of frames) total += headerBytes(f.length) + f.length;
  const out = new Uint8Array(total);
  let at = 0;
  frames.forEach((f, i) => {
    at = writeHeader(out, at, i < frames.length - 1 ? FLAG_MORE : 0, f.length);
    out.set(f, at);
    at += f.length;
  });
  return out;
}

/** A command frame: a name of 1–255 ASCII characters, then the command's data. */
export function encodeCommand(name: string, data: Uint8Array = new Uint8Array(0)): Uint8Array {
  const nameBytes = new TextEncoder().encode(name);
  if (nameBytes.length === 0 || nameBytes.length > SHORT_MAX) throw new RangeError(`bad command name ${JSON.stringify(name)}`);
  const size = 1 + nameBytes.length + data.length;
  const out = new Uint8Array(headerBytes(size) + size);
  let at = writeHeader(out, 0, FLAG_COMMAND, size);
  out[at++] = nameBytes.length;
  out.set(nameBytes, at);
  out.set(data, at + nameBytes.length);
  return out;
}

/**
 * Take the next complete frame off `queue`, or undefined until enough bytes
 * have arrived. A frame above `maxFrameBytes` is refused from its header,
 * before its body is buffered.
 */
export function takeFrame(queue: ByteQueue, maxFrameBytes: number): Frame | undefined {
  if (queue.length < 2) return undefined;
  const flags = queue.peekByte(0);
  const command = (flags & FLAG_COMMAND) !== 0;
  const more = (flags & FLAG_MORE) !== 0;
  if (command && more) throw new ZmtpProtocolError("protocol-violation", "a command frame with the MORE flag");
  let size: number;
  let header: number;
  if ((flags & FLAG_LONG) === 0) {
    size = queue.peekByte(1);
    header = 2;
  } else {
    if (queue.length < 9) return undefined;
    let big = 0n;
    for (let i = 1; i <= 8; i++) big = (big << 8n) | BigInt(queue.peekByte(i));
    if (big > BigInt(maxFrameBytes)) throw new ZmtpProtocolError("message-too-large", `a ${big}-byte frame exceeds the ${maxFrameBytes}-byte limit`);
    size = Number(big);
    header = 9;
  }
  if (size > maxFrameBytes) throw new ZmtpProtocolError("message-too-large", `a ${size}-byte frame exceeds the ${maxFrameBytes}-byte limit`);
  if (queue.length < header + size) return undefined;
  queue.skip(header);
  return { more, command, body: queue.read(size) };
}
