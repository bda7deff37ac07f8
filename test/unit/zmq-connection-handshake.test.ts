/** One ZMTP connection driven byte by byte through a recording transport: handshake, refusals, PING/PONG, limits, timeouts. */
import { describe, expect, test } from "bun:test";
import { ByteQueue } from "../../src/engines/zmq/byte-queue.ts";
import { decodeCommand, errorCommand, pingCommand, readyCommand } from "../../src/engines/zmq/commands.ts";
import { InboundBudget, ZmtpConnection, type ZmtpConnectionOptions, type ZmtpTransport } from "../../src/engines/zmq/connection.ts";
import type { ZmtpCloseReason } from "../../src/engines/zmq/errors.ts";
import { encodeCommand, encodeMessage, type Frame, takeFrame } from "../../src/engines/zmq/frames.ts";
import { encodeGreeting } from "../../src/engines/zmq/greeting.ts";

const text = (s: string): Uint8Array => new TextEncoder().encode(s);
const str = (b: Uint8Array | undefined): string => new TextDecoder().decode(b);

/** A transport that records what the connection writes, taking at most `window` bytes per write when set. */
class RecordingTransport implements ZmtpTransport {
  written = new ByteQueue();
  ended = false;
  window = Infinity;
  write(data: Uint8Array, byteOffset: number, byteLength: number): number {
    if (this.ended) return -1;
    const n = Math.min(byteLength, this.window);
    this.written.push(data.slice(byteOffset, byteOffset + n));
    return n;
  }
  end(): void {
    this.ended = true;
  }
  /** What the connection sent after its greeting, as frames. */
  frames(): Frame[] {
    const out: Frame[] = [];
    for (let f = takeFrame(this.written, 1 << 20); f; f = takeFrame(this.written, 1 << 20)) out.push(f);
    return out;
  }
}

function open(options: Partial<ZmtpConnectionOptions> & Pick<ZmtpConnectionOptions, "socketType">) {
  const transport = new RecordingTransport();
  const events = { ready: 0, messages: [] as string[][], subs: [] as string[], closed: [] as Array<[ZmtpCloseReason, string]> };
  const conn = new ZmtpConnection(transport, options, {
    ready: () => events.ready++,
    message: (_c, frames) => events.messages.push(frames.map(str)),
    subscription: (_c, sub, topic) => events.subs.push(`${sub ? "+" : "-"}${str(topic)}`),
    closed: (_c, reason, detail) => events.closed.push([reason, detail]),
  });
  expect(transport.written.length).toBe(64);
  transport.written.skip(64);
  return { conn, transport, events };
}

function peerGreeting(minor = 1): Uint8Array {
  const g = encodeGreeting();
  g[11] = minor;
  return g;
}

describe("ZMTP connection", () => {
  test("SUB meets a PUB: greeting, READY both ways, messages split anywhere", () => {
    const { conn, transport, events } = open({ socketType: "SUB" });
    const bytes = new Uint8Array([...peerGreeting(), ...readyCommand("PUB"), ...encodeMessage([text("kv@x"), text("payload")])]);
    for (let i = 0; i < bytes.length; i += 3) conn.receive(bytes.subarray(i, i + 3));
    expect(events.ready).toBe(1);
    expect(conn.peer).toEqual({ socketType: "PUB", identity: new Uint8Array(0), zmtpMinor: 1 });
    const [ready] = transport.frames();
    const cmd = decodeCommand(ready!.body);
    expect(cmd.name === "READY" && str(cmd.properties.get("socket-type"))).toBe("SUB");
    expect(cmd.name === "READY" && cmd.properties.has("identity")).toBe(false);
    expect(events.messages).toEqual([["kv@x", "payload"]]);
  });

  test("DEALER sends its Identity; a 3.0 peer's minor version is kept for the sockets above", () => {
    const { conn, transport } = open({ socketType: "DEALER", identity: text("me") });
    conn.receive(new Uint8Array([...peerGreeting(0), ...readyCommand("ROUTER", new Uint8Array(0))]));
    const cmd = decodeCommand(transport.frames()[0]!.body);
    expect(cmd.name === "READY" && str(cmd.properties.get("identity"))).toBe("me");
    expect(conn.peer?.zmtpMinor).toBe(0);
  });

  test("an incompatible socket type gets ERROR and the connection closes", () => {
    const { conn, transport, events } = open({ socketType: "SUB" });
    conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("SUB")]));
    const frames = transport.frames();
    expect(frames.map((f) => decodeCommand(f.body).name)).toEqual(["READY", "ERROR"]);
    expect(events.closed[0]?.[0]).toBe("incompatible-socket-type");
    expect(transport.ended).toBe(true);
    expect(events.ready).toBe(0);
  });

  test("what breaks the protocol closes with a reason, never throws", () => {
    const cases: Array<[string, Uint8Array, ZmtpCloseReason]> = [
      ["HTTP instead of ZMTP", text("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), "bad-signature"],
      ["a message before READY", new Uint8Array([...peerGreeting(), ...encodeMessage([text("x")])]), "protocol-violation"],
      ["a second READY", new Uint8Array([...peerGreeting(), ...readyCommand("PUB"), ...readyCommand("PUB")]), "protocol-violation"],
      ["ERROR in the handshake", new Uint8Array([...peerGreeting(), ...errorCommand("go away")]), "peer-error"],
      ["a PING before READY", new Uint8Array([...peerGreeting(), ...pingCommand(0)]), "protocol-violation"],
    ];
    for (const [what, bytes, expected] of cases) {
      const { conn, events } = open({ socketType: "SUB" });
      conn.receive(bytes);
      expect([what, events.closed[0]?.[0]]).toEqual([what, expected]);
      expect(conn.isClosed).toBe(true);
    }
  });

  test("message limits: bytes and frames", () => {
    const big = open({ socketType: "SUB", maxMessageBytes: 100 });
    big.conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("PUB"), ...encodeMessage([new Uint8Array(60), new Uint8Array(60)])]));
    expect(big.events.closed[0]?.[0]).toBe("message-too-large");
    const many = open({ socketType: "SUB", maxMessageFrames: 3 });
    many.conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("PUB"), ...encodeMessage([text("a"), text("b"), text("c"), text("d")])]));
    expect(many.events.closed[0]?.[0]).toBe("message-too-large");
  });

  test("connections sharing an inbound budget: partial messages count together; the one past the sum is closed, a closed one gives its share back", () => {
    const budget = new InboundBudget(250);
    const partial = (n: number) => encodeMessage([new Uint8Array(n)]).subarray(0, n - 5);
    const a = open({ socketType: "SUB", maxMessageBytes: 200, inboundBudget: budget });
    const b = open({ socketType: "SUB", maxMessageBytes: 200, inboundBudget: budget });
    for (const c of [a, b]) c.conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("PUB")]));
    a.conn.receive(partial(150));
    expect([a.conn.isClosed, budget.held]).toEqual([false, 145]);
    // Each within the message bound, together past the budget: the one that went past is closed.
    b.conn.receive(partial(150));
    expect([a.conn.isClosed, b.conn.isClosed, b.events.closed[0]?.[0], budget.held]).toEqual([false, true, "message-too-large", 145]);
    // Whole messages are handed on and held no longer.
    const c = open({ socketType: "SUB", maxMessageBytes: 200, inboundBudget: budget });
    c.conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("PUB"), ...encodeMessage([text("kv@x"), new Uint8Array(90)])]));
    expect([c.conn.isClosed, c.events.messages.length, budget.held]).toEqual([false, 1, 145]);
    a.conn.close();
    expect(budget.held).toBe(0);
  });

  test("PING gets a PONG with its context; SUBSCRIBE/CANCEL reach the socket; unknown commands are ignored", () => {
    const { conn, transport, events } = open({ socketType: "PUB" });
    conn.receive(
      new Uint8Array([
        ...peerGreeting(),
        ...readyCommand("SUB"),
        ...pingCommand(100, text("abc")),
        ...encodeCommand("SUBSCRIBE", text("kv")),
        ...encodeCommand("NEWTHING"),
        ...encodeCommand("CANCEL", text("kv")),
      ]),
    );
    const names = transport.frames().map((f) => decodeCommand(f.body));
    expect(names[1]).toEqual({ name: "PONG", context: text("abc") });
    expect(events.subs).toEqual(["+kv", "-kv"]);
    expect(conn.isReady).toBe(true);
  });

  test("backpressure: what the kernel does not take waits for drain; the high-water mark drops whole messages", () => {
    const { conn, transport } = open({ socketType: "PUB", sendHwmMessages: 2 });
    conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("SUB")]));
    transport.frames();
    transport.window = 0;
    expect(conn.send([text("one")])).toBe("queued");
    expect(conn.send([text("two")])).toBe("queued");
    expect(conn.send([text("three")])).toBe("over-hwm");
    expect(conn.queuedMessages).toBe(2);
    transport.window = 3;
    conn.drain();
    transport.window = Infinity;
    conn.drain();
    expect(conn.queuedMessages).toBe(0);
    expect(transport.frames().map((f) => str(f.body))).toEqual(["one", "two"]);
  });

  test("handshake and heartbeat timeouts", async () => {
    const slow = open({ socketType: "SUB", handshakeTimeoutMs: 30 });
    const silent = open({ socketType: "SUB", heartbeat: { intervalMs: 20, timeoutMs: 80 } });
    silent.conn.receive(new Uint8Array([...peerGreeting(), ...readyCommand("PUB")]));
    await Bun.sleep(250);
    expect(slow.events.closed[0]?.[0]).toBe("handshake-timeout");
    expect(silent.events.closed[0]?.[0]).toBe("heartbeat-timeout");
    const pings = silent.transport
      .frames()
      .slice(1)
      .map((f) => decodeCommand(f.body));
    expect(pings.length).toBeGreaterThan(0);
    expect(pings[0]).toEqual({ name: "PING", ttlDeciseconds: 1, context: new Uint8Array(0) });
  });
});
