/**
 * One ZMTP 3.1 connection over a TCP byte stream: greeting, NULL-security
 * READY handshake (RFC 23/ZMTP), multipart messages, commands, heartbeats
 * (PING/PONG, RFC 37/ZMTP 3.1). It knows nothing of sockets' routing: PUB,
 * SUB, ROUTER and DEALER sit on top. Bytes in through `receive`, out through a
 * SendQueue; driven by the listener or dialer that owns the TCP socket.
 */
import { ByteQueue } from "./byte-queue.ts";
import { decodeCommand, errorCommand, pingCommand, pongCommand, readyCommand, type ZmtpCommand } from "./commands.ts";
import { type ZmtpCloseReason, ZmtpProtocolError } from "./errors.ts";
import { encodeMessage, takeFrame } from "./frames.ts";
import { checkSignature, encodeGreeting, GREETING_BYTES, parseGreeting, SIGNATURE_BYTES } from "./greeting.ts";
import { type ByteSink, type EnqueueResult, SendQueue } from "./send-queue.ts";
import { peerTypeAllowed, sendsIdentity, type ZmtpSocketType } from "./socket-types.ts";

/** libzmq's defaults where it has one: ZMQ_SNDHWM 1000 messages. */
const DEFAULT_SEND_HWM_MESSAGES = 1000;
/** libzmq has no limit (ZMQ_MAXMSGSIZE -1); a gateway reading untrusted peers wants one. */
const DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024;
const DEFAULT_MAX_MESSAGE_FRAMES = 1024;
/** libzmq's ZMQ_HANDSHAKE_IVL default. */
const DEFAULT_HANDSHAKE_TIMEOUT_MS = 30_000;

interface HeartbeatOptions {
  /** How often to PING a silent peer (libzmq: ZMQ_HEARTBEAT_IVL). */
  intervalMs: number;
  /** Close when nothing at all has arrived for this long (libzmq: ZMQ_HEARTBEAT_TIMEOUT); also sent as the PING's TTL. */
  timeoutMs: number;
}

/**
 * Bytes that several connections hold together, unparsed or in partial
 * messages (a bound socket's publishers): the connection whose bytes take the
 * sum past `maxBytes` is closed, so a flood of connections holds at most
 * this, not their number times the message bound.
 */
export class InboundBudget {
  held = 0;
  constructor(readonly maxBytes: number) {}
}

export interface ZmtpConnectionOptions {
  socketType: ZmtpSocketType;
  /** Shared by the connections of one bound socket; none: only the per-message bound applies. */
  inboundBudget?: InboundBudget;
  /** Our Identity property (ROUTER/DEALER only); empty lets the ROUTER peer pick one. */
  identity?: Uint8Array;
  sendHwmMessages?: number;
  maxMessageBytes?: number;
  maxMessageFrames?: number;
  handshakeTimeoutMs?: number;
  heartbeat?: HeartbeatOptions;
}

/** What the peer told us in its greeting and READY. */
interface ZmtpPeer {
  socketType: string;
  /** The Identity property; empty when the peer sent none. */
  identity: Uint8Array;
  /** 0 for a ZMTP 3.0 peer (subscriptions travel as messages), 1 for 3.1. */
  zmtpMinor: number;
}

export interface ZmtpConnectionHandlers {
  ready(conn: ZmtpConnection): void;
  message(conn: ZmtpConnection, frames: Uint8Array[]): void;
  /** A SUBSCRIBE (true) or CANCEL (false) command; only PUB sockets act on them. */
  subscription(conn: ZmtpConnection, subscribe: boolean, topic: Uint8Array): void;
  closed(conn: ZmtpConnection, reason: ZmtpCloseReason, detail: string): void;
}

/** The TCP side a connection needs: Bun's Socket fits. */
export interface ZmtpTransport extends ByteSink {
  end(): void;
  /** Stop and restart reading (TCP backpressure: the peer's sends wait in its own queue); optional for transports that cannot. */
  pause?(): void;
  resume?(): void;
}

type Phase = "greeting" | "handshake" | "ready" | "closed";

export class ZmtpConnection {
  private phase: Phase = "greeting";
  private readonly inbound = new ByteQueue();
  /** What this connection counts in its inbound budget. */
  private heldCounted = 0;
  private readonly outbound: SendQueue;
  private signatureChecked = false;
  private peerMinor = 0;
  private peerInfo: ZmtpPeer | undefined;
  private parts: Uint8Array[] = [];
  private partsBytes = 0;
  private lastHeardAt = Date.now();
  private readonly handshakeTimer: ReturnType<typeof setTimeout>;
  private heartbeatTimer: ReturnType<typeof setInterval> | undefined;
  private readonly maxMessageBytes: number;
  private readonly maxMessageFrames: number;

  constructor(
    private readonly transport: ZmtpTransport,
    private readonly options: ZmtpConnectionOptions,
    private readonly handlers: ZmtpConnectionHandlers,
  ) {
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.maxMessageFrames = options.maxMessageFrames ?? DEFAULT_MAX_MESSAGE_FRAMES;
    this.outbound = new SendQueue(transport, options.sendHwmMessages ?? DEFAULT_SEND_HWM_MESSAGES, () =>
      this.close("connection-lost", "write to a closed socket"),
    );
    this.handshakeTimer = setTimeout(() => this.close("handshake-timeout", "no READY in time"), options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS);
    this.handshakeTimer.unref?.();
    // The whole greeting goes at once: libzmq sends its signature first and
    // waits for ours before the rest, so waiting for the peer would deadlock.
    this.outbound.enqueueControl(encodeGreeting());
  }

  /** Set once the handshake is done. */
  get peer(): ZmtpPeer | undefined {
    return this.peerInfo;
  }

  get isReady(): boolean {
    return this.phase === "ready";
  }

  get isClosed(): boolean {
    return this.phase === "closed";
  }

  get queuedMessages(): number {
    return this.outbound.queuedMessages;
  }

  /** Milliseconds since the epoch when the peer last sent anything (a PONG counts). */
  get lastHeardAtMs(): number {
    return this.lastHeardAt;
  }

  /** Bytes from the TCP socket. */
  receive(chunk: Uint8Array): void {
    if (this.phase === "closed") return;
    this.lastHeardAt = Date.now();
    this.inbound.push(chunk);
    try {
      this.parse();
      const budget = this.options.inboundBudget;
      if (budget !== undefined) {
        this.countHeld(this.inbound.length + this.partsBytes);
        if (budget.held > budget.maxBytes)
          throw new ZmtpProtocolError("message-too-large", `the bound socket's publishers hold above ${budget.maxBytes} bytes together`);
      }
    } catch (err) {
      if (!(err instanceof ZmtpProtocolError)) throw err;
      // RFC 23: a peer that detects an error during the handshake MAY say why.
      if (this.phase === "handshake" && err.reason !== "peer-error") this.outbound.enqueueControl(errorCommand(err.message));
      this.close(err.reason, err.message);
    }
  }

  /** This connection's share of its inbound budget is now `bytes`. */
  private countHeld(bytes: number): void {
    const budget = this.options.inboundBudget;
    if (budget === undefined) return;
    budget.held += bytes - this.heldCounted;
    this.heldCounted = bytes;
  }

  /**
   * Stop reading from the peer (true) or start again: a consumer that cannot
   * keep up leaves the bytes in the kernel's buffers and the peer's queue,
   * where its high-water mark bounds them, instead of in this process.
   */
  setReading(reading: boolean): void {
    if (this.phase === "closed") return;
    if (reading) this.transport.resume?.();
    else this.transport.pause?.();
  }

  /** The TCP socket can take more bytes. */
  drain(): void {
    this.outbound.flush();
  }

  /** The TCP socket ended under us. */
  transportClosed(): void {
    this.close("connection-lost", "TCP connection closed");
  }

  /** Queue a multipart message; "over-hwm" means it was dropped, whole. */
  send(frames: readonly Uint8Array[]): EnqueueResult | "not-ready" {
    return this.sendEncoded(encodeMessage(frames));
  }

  /** Queue a message already encoded with `encodeMessage` (a PUB encodes once for all its subscribers). */
  sendEncoded(message: Uint8Array): EnqueueResult | "not-ready" {
    if (this.phase === "closed") return "closed";
    if (this.phase !== "ready") return "not-ready";
    return this.outbound.enqueueMessage(message);
  }

  /** Queue a command frame (SUBSCRIBE, CANCEL…); commands pass the high-water mark. */
  sendCommand(bytes: Uint8Array): void {
    if (this.phase === "ready") this.outbound.enqueueControl(bytes);
  }

  /** See SendQueue.waitForRoom. */
  waitForRoom(): Promise<boolean> {
    return this.outbound.waitForRoom();
  }

  close(reason: ZmtpCloseReason = "closed-locally", detail = ""): void {
    if (this.phase === "closed") return;
    this.phase = "closed";
    clearTimeout(this.handshakeTimer);
    if (this.heartbeatTimer !== undefined) clearInterval(this.heartbeatTimer);
    this.outbound.close();
    this.inbound.clear();
    this.parts = [];
    this.countHeld(0);
    try {
      this.transport.end();
    } catch {
      // Already closed by the peer: nothing left to end.
    }
    this.handlers.closed(this, reason, detail);
  }

  private parse(): void {
    while (this.phase !== "closed") {
      if (this.phase === "greeting") {
        if (!this.signatureChecked && this.inbound.length >= SIGNATURE_BYTES) {
          checkSignature(this.inbound.peek(SIGNATURE_BYTES));
          this.signatureChecked = true;
        }
        if (this.inbound.length < GREETING_BYTES) return;
        this.peerMinor = parseGreeting(this.inbound.read(GREETING_BYTES)).minor;
        this.phase = "handshake";
        const identity = sendsIdentity(this.options.socketType) ? (this.options.identity ?? new Uint8Array(0)) : undefined;
        this.outbound.enqueueControl(readyCommand(this.options.socketType, identity));
        continue;
      }
      const frame = takeFrame(this.inbound, this.maxMessageBytes);
      if (frame === undefined) return;
      if (frame.command) {
        this.onCommand(decodeCommand(frame.body));
        continue;
      }
      if (this.phase !== "ready") throw new ZmtpProtocolError("protocol-violation", "a message frame before READY");
      this.partsBytes += frame.body.length;
      this.parts.push(frame.body);
      if (this.partsBytes > this.maxMessageBytes) throw new ZmtpProtocolError("message-too-large", `a message above ${this.maxMessageBytes} bytes`);
      if (this.parts.length > this.maxMessageFrames) throw new ZmtpProtocolError("message-too-large", `a message above ${this.maxMessageFrames} frames`);
      if (frame.more) continue;
      const message = this.parts;
      this.parts = [];
      this.partsBytes = 0;
      this.handlers.message(this, message);
    }
  }

  private onCommand(cmd: ZmtpCommand): void {
    if (this.phase === "handshake") {
      if (cmd.name === "ERROR") throw new ZmtpProtocolError("peer-error", `peer refused the handshake: ${cmd.reason}`);
      if (cmd.name !== "READY") throw new ZmtpProtocolError("protocol-violation", `${cmd.name} before READY`);
      this.onReady(cmd.properties);
      return;
    }
    switch (cmd.name) {
      case "READY":
        throw new ZmtpProtocolError("protocol-violation", "a second READY");
      case "ERROR":
        throw new ZmtpProtocolError("peer-error", `peer sent ERROR: ${cmd.reason}`);
      case "SUBSCRIBE":
      case "CANCEL":
        this.handlers.subscription(this, cmd.name === "SUBSCRIBE", cmd.topic);
        return;
      case "PING":
        // libzmq answers every PING whatever its own heartbeat settings; so do we.
        this.outbound.enqueueControl(pongCommand(cmd.context));
        return;
      case "PONG":
      case "OTHER":
        return;
      default: {
        const never: never = cmd;
        throw new Error(`unhandled command ${JSON.stringify(never)}`);
      }
    }
  }

  private onReady(properties: Map<string, Uint8Array>): void {
    const rawType = properties.get("socket-type");
    const socketType = rawType === undefined ? "" : new TextDecoder().decode(rawType);
    if (!peerTypeAllowed(this.options.socketType, socketType)) {
      throw new ZmtpProtocolError("incompatible-socket-type", `a ${this.options.socketType} socket cannot talk to ${JSON.stringify(socketType)}`);
    }
    const identity = properties.get("identity") ?? new Uint8Array(0);
    if (identity.length > 255) throw new ZmtpProtocolError("protocol-violation", "an Identity above 255 bytes");
    this.peerInfo = { socketType, identity: identity.slice(), zmtpMinor: this.peerMinor };
    this.phase = "ready";
    clearTimeout(this.handshakeTimer);
    this.startHeartbeat();
    this.handlers.ready(this);
  }

  private startHeartbeat(): void {
    const hb = this.options.heartbeat;
    if (hb === undefined) return;
    this.heartbeatTimer = setInterval(() => {
      if (Date.now() - this.lastHeardAt > hb.timeoutMs) {
        this.close("heartbeat-timeout", `nothing heard for ${hb.timeoutMs} ms`);
        return;
      }
      this.outbound.enqueueControl(pingCommand(hb.timeoutMs / 100));
    }, hb.intervalMs);
    this.heartbeatTimer.unref?.();
  }
}
