/**
 * A ZMQ DEALER socket that connects (and reconnects) to one ROUTER (RFC
 * 28/REQREP). Unlike libzmq's DEALER it does not queue while disconnected:
 * `send` says "not-connected" and the caller decides, which is what a
 * request with its own deadline wants.
 */
import { ZmtpDialer, type ZmtpDialerOptions } from "./dialer.ts";
import type { ZmtpCloseReason } from "./errors.ts";

type DealerSocketOptions = Omit<ZmtpDialerOptions, "socketType">;

interface DealerSocketEvents {
  message(frames: Uint8Array[]): void;
  connected?(): void;
  disconnected?(reason: ZmtpCloseReason, detail: string): void;
}

export class DealerSocket {
  private readonly dialer: ZmtpDialer;

  constructor(endpoint: string, options: DealerSocketOptions, events: DealerSocketEvents) {
    this.dialer = new ZmtpDialer(
      endpoint,
      { ...options, socketType: "DEALER" },
      {
        ready: () => events.connected?.(),
        message: (_conn, frames) => events.message(frames),
        subscription: () => {
          // Not a PUB: SUBSCRIBE/CANCEL mean nothing here.
        },
        closed: (conn, reason, detail) => {
          if (conn.peer !== undefined) events.disconnected?.(reason, detail);
        },
      },
    );
  }

  get connected(): boolean {
    return this.dialer.connection?.isReady ?? false;
  }

  /** Stop reading from the peer (false) until set back: see ZmtpConnection.setReading. */
  setReading(reading: boolean): void {
    this.dialer.setReading(reading);
  }

  send(frames: readonly Uint8Array[]): "queued" | "over-hwm" | "not-connected" {
    const c = this.dialer.connection;
    if (c === undefined || !c.isReady) return "not-connected";
    const r = c.send(frames);
    return r === "queued" ? "queued" : r === "over-hwm" ? "over-hwm" : "not-connected";
  }

  close(): void {
    this.dialer.close();
  }
}
