/**
 * A ZMQ PUB socket that binds, or connects (and reconnects) to one bound
 * SUB: each message goes to every handshaken subscriber whose subscriptions
 * match its first frame. A subscriber whose
 * queue is at the high-water mark loses the message, whole, and nobody else
 * waits for it (libzmq's PUB behaviour, RFC 29/PUBSUB). Subscriptions arrive
 * as ZMTP 3.1 SUBSCRIBE/CANCEL commands, or as ZMTP 3.0 messages whose first
 * byte is 1 (subscribe) or 0 (cancel).
 */
import type { ZmtpConnection, ZmtpConnectionHandlers, ZmtpConnectionOptions } from "./connection.ts";
import { ZmtpDialer } from "./dialer.ts";
import { parseTcpEndpoint } from "./endpoint.ts";
import type { ZmtpCloseReason } from "./errors.ts";
import { encodeMessage } from "./frames.ts";
import { ZmtpListener } from "./listener.ts";
import { Subscriptions } from "./subscriptions.ts";

/** Subscription messages are a byte and a topic; anything larger from a subscriber is hostile. */
const DEFAULT_PUB_MAX_INBOUND_BYTES = 64 * 1024;

type PubSocketOptions = Omit<ZmtpConnectionOptions, "socketType" | "identity"> & {
  /** Connect to a bound SUB at the endpoint instead of binding it (vLLM connects its PUB when the endpoint names a host). */
  connect?: boolean;
};

interface PubSendResult {
  /** Subscribers the message was queued for. */
  delivered: number;
  /** Matching subscribers that lost it to their high-water mark. */
  dropped: number;
}

interface PubSocketEvents {
  /** A subscriber's connection closed (for logs and counters). */
  subscriberClosed?(reason: ZmtpCloseReason, detail: string): void;
}

export class PubSocket {
  private readonly listener: ZmtpListener | undefined;
  private readonly dialer: ZmtpDialer | undefined;
  private readonly target: string;
  private readonly peers = new Map<ZmtpConnection, Subscriptions>();
  private dropped = 0;

  /** Binds now (throws if the address is taken), or starts dialing; throws on a malformed endpoint. */
  constructor(endpoint: string, options: PubSocketOptions = {}, events: PubSocketEvents = {}) {
    const peers = this.peers;
    const { connect, ...connOptions } = options;
    const handlers: ZmtpConnectionHandlers = {
      ready: (conn) => peers.set(conn, new Subscriptions()),
      subscription: (conn, subscribe, topic) => applySubscription(peers.get(conn), subscribe, topic),
      message: (conn, frames) => {
        // ZMTP 3.0 subscriptions: one frame, first byte 1 or 0, the topic after it.
        const first = frames[0]!;
        if (frames.length !== 1 || first.length === 0 || first[0]! > 1) return;
        applySubscription(peers.get(conn), first[0] === 1, first.subarray(1));
      },
      closed: (conn, reason, detail) => {
        peers.delete(conn);
        events.subscriberClosed?.(reason, detail);
      },
    };
    const opts = { maxMessageBytes: DEFAULT_PUB_MAX_INBOUND_BYTES, ...connOptions, socketType: "PUB" as const };
    this.target = endpoint;
    if (connect === true) this.dialer = new ZmtpDialer(endpoint, opts, handlers);
    else this.listener = new ZmtpListener(endpoint, opts, handlers);
  }

  /** As bound, or the endpoint dialed. */
  get endpoint(): string {
    return this.listener?.endpoint ?? this.target;
  }

  /** The bound port, or the one dialed. */
  get port(): number {
    return this.listener?.port ?? parseTcpEndpoint(this.target).port;
  }

  /** Subscribers past the handshake. */
  get subscriberCount(): number {
    return this.peers.size;
  }

  /** Messages lost to subscribers at their high-water mark since the socket opened. */
  get droppedMessages(): number {
    return this.dropped;
  }

  /** The topics each handshaken subscriber holds (for tests and diagnostics). */
  subscriptions(): Uint8Array[][] {
    return [...this.peers.values()].map((s) => s.topics());
  }

  send(frames: readonly Uint8Array[]): PubSendResult {
    const first = frames[0];
    if (first === undefined) throw new RangeError("a message has at least one frame");
    let delivered = 0;
    let dropped = 0;
    let encoded: Uint8Array | undefined;
    for (const [conn, subs] of this.peers) {
      if (!subs.matches(first)) continue;
      encoded ??= encodeMessage(frames);
      const r = conn.sendEncoded(encoded);
      if (r === "queued") delivered++;
      else if (r === "over-hwm") dropped++;
    }
    this.dropped += dropped;
    return { delivered, dropped };
  }

  close(): void {
    this.listener?.close();
    this.dialer?.close();
    this.peers.clear();
  }
}

function applySubscription(subs: Subscriptions | undefined, subscribe: boolean, topic: Uint8Array): void {
  if (subs === undefined) return;
  if (subscribe) subs.add(topic);
  else subs.remove(topic);
}
