/**
 * A ZMQ ROUTER socket that binds: every peer has an identity (the Identity it
 * announced in READY, or five bytes made up here starting with 0, as libzmq
 * does); incoming messages are handed up with it, and outgoing ones are routed
 * by it (RFC 28/REQREP). A message for an unknown identity, or for a peer at
 * its high-water mark, is dropped as libzmq drops it without
 * ZMQ_ROUTER_MANDATORY; a sender with more than the mark to send awaits
 * `waitForRoom` instead.
 */
import type { ZmtpConnection, ZmtpConnectionOptions } from "./connection.ts";
import type { ZmtpCloseReason } from "./errors.ts";
import { ZmtpListener } from "./listener.ts";

type RouterSocketOptions = Omit<ZmtpConnectionOptions, "socketType" | "identity">;

type RouterSendResult = "queued" | "over-hwm" | "unroutable";

interface RouterSocketEvents {
  message(identity: Uint8Array, frames: Uint8Array[]): void;
  peerClosed?(identity: Uint8Array, reason: ZmtpCloseReason, detail: string): void;
}

const key = (identity: Uint8Array): string => Buffer.from(identity).toString("latin1");

export class RouterSocket {
  private readonly listener: ZmtpListener;
  private readonly byIdentity = new Map<string, ZmtpConnection>();
  private readonly identities = new Map<ZmtpConnection, Uint8Array>();
  /** libzmq starts its generated routing ids at a random integer. */
  private nextId = Math.floor(Math.random() * 0xffffffff);

  constructor(endpoint: string, options: RouterSocketOptions, events: RouterSocketEvents) {
    this.listener = new ZmtpListener(
      endpoint,
      { ...options, socketType: "ROUTER" },
      {
        ready: (conn) => {
          const announced = conn.peer!.identity;
          const identity = announced.length > 0 ? announced : this.generatedIdentity();
          if (this.byIdentity.has(key(identity))) {
            conn.close("duplicate-identity", "another peer holds this identity");
            return;
          }
          this.byIdentity.set(key(identity), conn);
          this.identities.set(conn, identity);
        },
        message: (conn, frames) => {
          const identity = this.identities.get(conn);
          if (identity !== undefined) events.message(identity, frames);
        },
        subscription: () => {
          // Not a PUB: SUBSCRIBE/CANCEL mean nothing here.
        },
        closed: (conn, reason, detail) => {
          const identity = this.identities.get(conn);
          if (identity === undefined) return;
          this.identities.delete(conn);
          this.byIdentity.delete(key(identity));
          events.peerClosed?.(identity, reason, detail);
        },
      },
    );
  }

  get endpoint(): string {
    return this.listener.endpoint;
  }

  get port(): number {
    return this.listener.port;
  }

  get peerCount(): number {
    return this.identities.size;
  }

  send(identity: Uint8Array, frames: readonly Uint8Array[]): RouterSendResult {
    const conn = this.byIdentity.get(key(identity));
    if (conn === undefined) return "unroutable";
    const r = conn.send(frames);
    return r === "queued" ? "queued" : r === "over-hwm" ? "over-hwm" : "unroutable";
  }

  /** True once the peer's queue has room, false if it is gone. */
  async waitForRoom(identity: Uint8Array): Promise<boolean> {
    const conn = this.byIdentity.get(key(identity));
    return conn === undefined ? false : conn.waitForRoom();
  }

  close(): void {
    this.listener.close();
  }

  private generatedIdentity(): Uint8Array {
    const id = new Uint8Array(5);
    new DataView(id.buffer).setUint32(1, this.nextId);
    this.nextId = (this.nextId + 1) >>> 0;
    return id;
  }
}
