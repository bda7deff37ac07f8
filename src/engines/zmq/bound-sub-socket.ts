/**
 * A ZMQ SUB socket that binds, for publishers that connect to it (llm-d's
 * topology: every engine's PUB connects to the router's one SUB). Each
 * accepted connection is sent the socket's subscriptions on its handshake —
 * a libzmq PUB filters on its side and sends nothing before it has them —
 * and messages are filtered here too. Messages come with the connection
 * they arrived on, so a caller can tell publishers apart.
 */
import type { ZmtpConnection, ZmtpConnectionOptions } from "./connection.ts";
import type { ZmtpCloseReason } from "./errors.ts";
import { ZmtpListener } from "./listener.ts";
import { subscriptionFrames } from "./sub-socket.ts";
import { Subscriptions } from "./subscriptions.ts";

type BoundSubSocketOptions = Omit<ZmtpConnectionOptions, "socketType" | "identity"> & {
  /** Publishers connected at once; one more is closed on arrival. */
  maxConnections?: number;
};

interface BoundSubSocketEvents {
  message(conn: ZmtpConnection, frames: Uint8Array[]): void;
  /** A publisher's handshake is done and the subscriptions were sent to it. */
  connected?(conn: ZmtpConnection): void;
  /** A publisher's connection ended (only those past the handshake are reported). */
  disconnected?(conn: ZmtpConnection, reason: ZmtpCloseReason, detail: string): void;
}

export class BoundSubSocket {
  private readonly listener: ZmtpListener;
  private readonly subs = new Subscriptions();

  /** Binds now; throws if the address is taken or is not a tcp:// endpoint. */
  constructor(endpoint: string, topics: ReadonlyArray<string>, options: BoundSubSocketOptions, events: BoundSubSocketEvents) {
    for (const t of topics) this.subs.add(new TextEncoder().encode(t));
    const { maxConnections, ...connOptions } = options;
    this.listener = new ZmtpListener(
      endpoint,
      { ...connOptions, socketType: "SUB" },
      {
        ready: (conn) => {
          for (const t of this.subs.topics()) subscriptionFrames(conn, true, t);
          events.connected?.(conn);
        },
        message: (conn, frames) => {
          if (this.subs.matches(frames[0]!)) events.message(conn, frames);
        },
        subscription: () => {
          // A publisher has no business subscribing to us; ignore it.
        },
        closed: (conn, reason, detail) => {
          if (conn.peer !== undefined) events.disconnected?.(conn, reason, detail);
        },
      },
      maxConnections,
    );
  }

  /** `tcp://host:port` as bound (the kernel's port when the endpoint asked for 0). */
  get endpoint(): string {
    return this.listener.endpoint;
  }

  get port(): number {
    return this.listener.port;
  }

  /** Publishers connected, handshaken or not. */
  get connectionCount(): number {
    return this.listener.connections.size;
  }

  /** Connections closed on arrival because maxConnections were open. */
  get refusedConnections(): number {
    return this.listener.refusedConnections;
  }

  close(): void {
    this.listener.close();
  }
}
