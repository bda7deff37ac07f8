/**
 * The 64-byte ZMTP 3.x greeting (RFC 23/ZMTP §"The Greeting"): signature,
 * version, security mechanism, as-server flag, filler. Pure.
 */
import { ZmtpProtocolError } from "./errors.ts";

export const GREETING_BYTES = 64;
/** Bytes of the signature; enough to tell a ZMTP peer from anything else. */
export const SIGNATURE_BYTES = 10;
const MECHANISM_OFFSET = 12;
const MECHANISM_BYTES = 20;

/** What a peer's greeting says. */
interface PeerGreeting {
  major: number;
  minor: number;
  mechanism: string;
  asServer: boolean;
}

/**
 * Our greeting: ZMTP 3.1, NULL security. The 8 padding bytes are "not
 * significant" to a 3.x peer; libzmq writes there the ZMTP 1.0 length of an
 * empty identity (1) so that a 1.0 peer can read it, and so do we.
 */
export function encodeGreeting(): Uint8Array {
  const g = new Uint8Array(GREETING_BYTES);
  g[0] = 0xff;
  g[8] = 0x01;
  g[9] = 0x7f;
  g[10] = 3;
  g[11] = 1;
  g.set(new TextEncoder().encode("NULL"), MECHANISM_OFFSET);
  // as-server (byte 32) and the filler stay 0: NULL has no server role.
  return g;
}

/** Throws unless the first 10 bytes can start a ZMTP greeting (checked early, so a stray HTTP client is dropped at once). */
export function checkSignature(signature: Uint8Array): void {
  if (signature[0] !== 0xff || ((signature[9] ?? 0) & 0x01) !== 0x01) {
    throw new ZmtpProtocolError("bad-signature", "peer did not send a ZMTP signature");
  }
}

/**
 * Parse a peer's 64-byte greeting. A 3.x peer of any minor version is
 * accepted (RFC 23: "a peer MUST accept higher protocol versions as valid");
 * 1.0 and 2.0 peers (major < 3) are refused, and so is any mechanism but
 * NULL, the only one implemented.
 */
export function parseGreeting(greeting: Uint8Array): PeerGreeting {
  if (greeting.length !== GREETING_BYTES) throw new RangeError(`a greeting is ${GREETING_BYTES} bytes, got ${greeting.length}`);
  checkSignature(greeting);
  const major = greeting[10]!;
  const minor = greeting[11]!;
  if (major < 3) throw new ZmtpProtocolError("unsupported-version", `peer speaks ZMTP ${major}.${minor}; 3.0 or later is required`);
  const raw = greeting.subarray(MECHANISM_OFFSET, MECHANISM_OFFSET + MECHANISM_BYTES);
  const end = raw.indexOf(0);
  const mechanism = new TextDecoder().decode(end === -1 ? raw : raw.subarray(0, end));
  if (mechanism !== "NULL")
    throw new ZmtpProtocolError("unsupported-mechanism", `peer asks for the ${JSON.stringify(mechanism)} security mechanism; only NULL is supported`);
  return { major, minor, mechanism, asServer: greeting[32] === 1 };
}
