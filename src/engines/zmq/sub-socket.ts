/**
 * A ZMQ SUB socket that connects (and reconnects) to one publisher. On every
 * handshake it sends its subscriptions: SUBSCRIBE commands to a ZMTP 3.1
 * peer, `\x01topic` messages to a 3.0 one (RFC 37/ZMTP 3.1 §"Subscriptions").
 * Messages are filtered here too, as libzmq's SUB does, so a publisher that
 * does not filter cannot push unwanted topics through.
 */
import type { ZmtpConnection } from "./connection.ts";
import { ZmtpDialer, type ZmtpDialerOptions } from "./dialer.ts";
import type { ZmtpCloseReason } from "./errors.ts";
import { encodeCommand } from "./frames.ts";
import { Subscriptions } from "./subscriptions.ts";

type SubSocketOptions = Omit<ZmtpDialerOptions, "socketType" | "identity">;

interface SubSocketEvents {
  message(frames: Uint8Array[]): void;
  /** Handshake done and subscriptions sent. */
  connected?(): void;
  disconnected?(reason: ZmtpCloseReason, detail: string): void;
}

const toBytes = (t: string | Uint8Array): Uint8Array => (typeof t === "string" ? new TextEncoder().encode(t) : t);

export function subscriptionFrames(conn: ZmtpConnection, subscribe: boolean, topic: Uint8Array): void {
  if ((conn.peer?.zmtpMinor ?? 0) >= 1) {
    conn.sendCommand(encodeCommand(subscribe ? "SUBSCRIBE" : "CANCEL", topic));
    return;
  }
  const msg = new Uint8Array(1 + topic.length);
  msg[0] = subscribe ? 1 : 0;
  msg.set(topic, 1);
  conn.send([msg]);
}

export class SubSocket {
  private readonly dialer: ZmtpDialer;
  private readonly subs = new Subscriptions();

  constructor(endpoint: string, topics: ReadonlyArray<string | Uint8Array>, options: SubSocketOptions = {}, events: SubSocketEvents) {
    for (const t of topics) this.subs.add(toBytes(t));
    this.dialer = new ZmtpDialer(
      endpoint,
      { ...options, socketType: "SUB" },
      {
        ready: (conn) => {
          for (const t of this.subs.topics()) subscriptionFrames(conn, true, t);
          events.connected?.();
        },
        message: (_conn, frames) => {
          if (this.subs.matches(frames[0]!)) events.message(frames);
        },
        subscription: () => {
          // A publisher has no business subscribing to us; ignore it.
        },
        closed: (conn, reason, detail) => {
          // Only a connection that got past the handshake was "connected".
          if (conn.peer !== undefined) events.disconnected?.(reason, detail);
        },
      },
    );
  }

  get connected(): boolean {
    return this.dialer.connection?.isReady ?? false;
  }

  /** TCP connection attempts so far. */
  get dialAttempts(): number {
    return this.dialer.attempts;
  }

  /** When the publisher last sent anything on the current connection; undefined while disconnected. */
  get lastHeardAtMs(): number | undefined {
    const c = this.dialer.connection;
    return c?.isReady ? c.lastHeardAtMs : undefined;
  }

  /** Stop reading from the peer (false) until set back: see ZmtpConnection.setReading. */
  setReading(reading: boolean): void {
    this.dialer.setReading(reading);
  }

  subscribe(topic: string | Uint8Array): void {
    const t = toBytes(topic);
    this.subs.add(t);
    const c = this.dialer.connection;
    if (c?.isReady) subscriptionFrames(c, true, t);
  }

  unsubscribe(topic: string | Uint8Array): void {
    const t = toBytes(topic);
    this.subs.remove(t);
    const c = this.dialer.connection;
    if (c?.isReady) subscriptionFrames(c, false, t);
  }

  close(): void {
    this.dialer.close();
  }
}
