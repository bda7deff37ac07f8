/** Why a ZMTP connection was closed: a closed set, fit to be a metric label. */

export type ZmtpCloseReason =
  /** The peer did not open with a ZMTP signature. */
  | "bad-signature"
  /** ZMTP 1.0/2.0 peer. */
  | "unsupported-version"
  /** A security mechanism other than NULL. */
  | "unsupported-mechanism"
  /** The peer's Socket-Type cannot talk to ours (RFC 23 table: PUB–SUB, ROUTER–DEALER…). */
  | "incompatible-socket-type"
  /** A ROUTER peer announced an identity another live peer already holds. */
  | "duplicate-identity"
  /** A frame or a whole message above the configured limit. */
  | "message-too-large"
  /** A command that does not parse, or a frame where the protocol forbids one. */
  | "protocol-violation"
  /** The peer sent an ERROR command. */
  | "peer-error"
  /** Greeting and READY did not complete in time. */
  | "handshake-timeout"
  /** Nothing heard from the peer within the heartbeat timeout. */
  | "heartbeat-timeout"
  /** The TCP connection ended (FIN, reset, or a failed write). */
  | "connection-lost"
  /** Closed by our own side. */
  | "closed-locally";

/** A peer broke the protocol; the connection is closed with `reason`. */
export class ZmtpProtocolError extends Error {
  constructor(
    readonly reason: ZmtpCloseReason,
    message: string,
  ) {
    super(message);
    this.name = "ZmtpProtocolError";
  }
}
