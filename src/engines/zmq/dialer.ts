/**
 * The connecting side of a ZMQ socket: dials a tcp:// endpoint and dials
 * again whenever the connection fails or ends, as libzmq does, backing off
 * from `reconnectIntervalMs` to `reconnectIntervalMaxMs` until a handshake
 * succeeds. SUB and DEALER sit on it.
 */
import type { Socket } from "bun";
import { ZmtpConnection, type ZmtpConnectionHandlers, type ZmtpConnectionOptions } from "./connection.ts";
import { parseTcpEndpoint, type TcpEndpoint } from "./endpoint.ts";

/** libzmq's ZMQ_RECONNECT_IVL default. */
const DEFAULT_RECONNECT_INTERVAL_MS = 100;
/** libzmq doubles nothing by default (ZMQ_RECONNECT_IVL_MAX 0); a bounded backoff spares a dead peer's host. */
const DEFAULT_RECONNECT_INTERVAL_MAX_MS = 5_000;

export interface ZmtpDialerOptions extends ZmtpConnectionOptions {
  reconnectIntervalMs?: number;
  reconnectIntervalMaxMs?: number;
}

interface SocketState {
  conn?: ZmtpConnection;
}

export class ZmtpDialer {
  private readonly target: TcpEndpoint;
  private current: ZmtpConnection | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  private stopped = false;
  private dials = 0;
  private reading = true;

  constructor(
    endpoint: string,
    private readonly options: ZmtpDialerOptions,
    private readonly handlers: ZmtpConnectionHandlers,
  ) {
    this.target = parseTcpEndpoint(endpoint);
    if (this.target.port === 0) throw new Error(`cannot connect to port 0 (${endpoint})`);
    this.dial();
  }

  /** The live connection, handshaken or not; undefined between attempts. */
  get connection(): ZmtpConnection | undefined {
    return this.current;
  }

  /** TCP connection attempts so far, the first included. */
  get attempts(): number {
    return this.dials;
  }

  /** Pause (false) or resume reading, now and on every connection dialed later. */
  setReading(reading: boolean): void {
    this.reading = reading;
    this.current?.setReading(reading);
  }

  /** Stop dialing and close the connection. */
  close(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.current?.close("closed-locally");
    this.current = undefined;
  }

  private dial(): void {
    this.timer = undefined;
    if (this.stopped) return;
    this.dials++;
    const tracked: ZmtpConnectionHandlers = {
      ready: (c) => {
        this.failures = 0;
        this.handlers.ready(c);
      },
      message: (c, frames) => this.handlers.message(c, frames),
      subscription: (c, sub, topic) => this.handlers.subscription(c, sub, topic),
      closed: (c, reason, detail) => {
        if (this.current === c) this.current = undefined;
        this.handlers.closed(c, reason, detail);
        this.scheduleRedial();
      },
    };
    const options = this.options;
    const self = this;
    Bun.connect<SocketState>({
      hostname: this.target.host,
      port: this.target.port,
      data: {},
      socket: {
        binaryType: "uint8array",
        open(socket: Socket<SocketState>) {
          if (self.stopped) {
            socket.end();
            return;
          }
          socket.setNoDelay(true);
          const conn = new ZmtpConnection(socket, options, tracked);
          socket.data = { conn };
          self.current = conn;
          if (!self.reading) conn.setReading(false);
        },
        data(socket, chunk) {
          socket.data.conn?.receive(chunk);
        },
        drain(socket) {
          socket.data.conn?.drain();
        },
        close(socket) {
          socket.data.conn?.transportClosed();
        },
        error(socket, err) {
          socket.data.conn?.close("connection-lost", err.message);
        },
        connectError() {
          self.scheduleRedial();
        },
      },
    }).catch(() => {
      // connectError has already scheduled the next attempt.
    });
  }

  private scheduleRedial(): void {
    if (this.stopped || this.timer !== undefined) return;
    const base = this.options.reconnectIntervalMs ?? DEFAULT_RECONNECT_INTERVAL_MS;
    const max = Math.max(base, this.options.reconnectIntervalMaxMs ?? DEFAULT_RECONNECT_INTERVAL_MAX_MS);
    const delay = Math.min(max, base * 2 ** Math.min(this.failures, 20));
    this.failures++;
    this.timer = setTimeout(() => this.dial(), delay);
  }
}
