/** ZMTP 3.1's pure parts against literal bytes from RFC 23/37: greeting, framing, commands, subscriptions, endpoints. */
import { describe, expect, test } from "bun:test";
import { ByteQueue } from "../../src/engines/zmq/byte-queue.ts";
import { decodeCommand, decodeProperties, encodeProperties, errorCommand, pingCommand, pongCommand, readyCommand } from "../../src/engines/zmq/commands.ts";
import { formatTcpEndpoint, parseTcpEndpoint } from "../../src/engines/zmq/endpoint.ts";
import { ZmtpProtocolError } from "../../src/engines/zmq/errors.ts";
import { encodeCommand, encodeMessage, takeFrame } from "../../src/engines/zmq/frames.ts";
import { encodeGreeting, parseGreeting } from "../../src/engines/zmq/greeting.ts";
import { Subscriptions } from "../../src/engines/zmq/subscriptions.ts";

const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
const bytes = (h: string): Uint8Array => new Uint8Array(Buffer.from(h.replace(/\s+/g, ""), "hex"));
const text = (s: string): Uint8Array => new TextEncoder().encode(s);

function reason(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof ZmtpProtocolError) return err.reason;
    throw err;
  }
  return "no error";
}

describe("greeting", () => {
  test("ours is ZMTP 3.1, NULL, libzmq's padding, 64 bytes", () => {
    expect(hex(encodeGreeting())).toBe("ff00000000000000017f" + "0301" + hex(text("NULL")) + "00".repeat(16) + "00" + "00".repeat(31));
  });

  test("a 3.0 peer is accepted with its minor version; 2.0, PLAIN and non-ZMTP bytes are refused", () => {
    const g = encodeGreeting();
    g[11] = 0;
    expect(parseGreeting(g)).toEqual({ major: 3, minor: 0, mechanism: "NULL", asServer: false });
    const v2 = encodeGreeting();
    v2[10] = 2;
    expect(reason(() => parseGreeting(v2))).toBe("unsupported-version");
    const plain = encodeGreeting();
    plain.set(text("PLAIN"), 12);
    expect(reason(() => parseGreeting(plain))).toBe("unsupported-mechanism");
    const http = new Uint8Array(64);
    http.set(text("GET / HTTP/1.1\r\n"));
    expect(reason(() => parseGreeting(http))).toBe("bad-signature");
  });
});

describe("framing", () => {
  test("short and long frames with MORE on all but the last", () => {
    const big = new Uint8Array(256).fill(7);
    const wire = encodeMessage([text("ab"), new Uint8Array(0), big]);
    expect(hex(wire.subarray(0, 8))).toBe("0102616201000200");
    expect(hex(wire.subarray(6, 15))).toBe("020000000000000100");
    expect(wire.length).toBe(4 + 2 + 9 + 256);
  });

  test("a message split at every byte decodes the same", () => {
    const frames = [text("topic"), bytes("0000000000000007"), new Uint8Array(300).fill(1)];
    const wire = encodeMessage(frames);
    const q = new ByteQueue();
    const out: Uint8Array[] = [];
    for (let i = 0; i < wire.length; i++) {
      q.push(wire.subarray(i, i + 1));
      for (let f = takeFrame(q, 1 << 20); f !== undefined; f = takeFrame(q, 1 << 20)) out.push(f.body);
    }
    expect(out.map(hex)).toEqual(frames.map(hex));
    expect(q.length).toBe(0);
  });

  test("a frame above the limit is refused from its header alone", () => {
    const q = new ByteQueue();
    q.push(bytes("02 7fffffffffffffff"));
    expect(reason(() => takeFrame(q, 1024))).toBe("message-too-large");
    const short = new ByteQueue();
    short.push(bytes("00 ff"));
    expect(reason(() => takeFrame(short, 100))).toBe("message-too-large");
  });

  test("a command frame with MORE is a protocol violation", () => {
    const q = new ByteQueue();
    q.push(bytes("05 01 00"));
    expect(reason(() => takeFrame(q, 100))).toBe("protocol-violation");
  });
});

describe("commands", () => {
  test("READY as libzmq writes it for a PUB and a DEALER", () => {
    expect(hex(readyCommand("PUB"))).toBe("0419" + "05" + hex(text("READY")) + "0b" + hex(text("Socket-Type")) + "00000003" + hex(text("PUB")));
    const dealer = readyCommand("DEALER", text("id1"));
    const frame = takeFrame(queueOf(dealer), 1024)!;
    expect(frame.command).toBe(true);
    const cmd = decodeCommand(frame.body);
    expect(cmd.name).toBe("READY");
    if (cmd.name !== "READY") return;
    expect(new TextDecoder().decode(cmd.properties.get("socket-type"))).toBe("DEALER");
    expect(new TextDecoder().decode(cmd.properties.get("identity"))).toBe("id1");
  });

  test("property names are case-insensitive; truncated metadata is refused", () => {
    const props = decodeProperties(
      encodeProperties([
        ["SOCKET-TYPE", text("SUB")],
        ["X-Extra", new Uint8Array(0)],
      ]),
    );
    expect([...props.keys()]).toEqual(["socket-type", "x-extra"]);
    const bad = encodeProperties([["Socket-Type", text("SUB")]]).subarray(0, 10);
    expect(reason(() => decodeProperties(bad))).toBe("protocol-violation");
  });

  test("SUBSCRIBE, CANCEL, PING, PONG, ERROR and unknown commands", () => {
    const body = (wire: Uint8Array): Uint8Array => takeFrame(queueOf(wire), 1024)!.body;
    expect(decodeCommand(body(encodeCommand("SUBSCRIBE", text("kv@"))))).toEqual({ name: "SUBSCRIBE", topic: text("kv@") });
    expect(decodeCommand(body(encodeCommand("CANCEL", new Uint8Array(0))))).toEqual({ name: "CANCEL", topic: new Uint8Array(0) });
    expect(decodeCommand(body(pingCommand(150, text("ctx"))))).toEqual({ name: "PING", ttlDeciseconds: 150, context: text("ctx") });
    expect(decodeCommand(body(pongCommand(text("ctx"))))).toEqual({ name: "PONG", context: text("ctx") });
    expect(decodeCommand(body(errorCommand("nope")))).toEqual({ name: "ERROR", reason: "nope" });
    expect(decodeCommand(body(encodeCommand("HELLO", text("x"))))).toEqual({ name: "OTHER", rawName: "HELLO" });
    expect(reason(() => decodeCommand(bytes("05 5245")))).toBe("protocol-violation");
    expect(reason(() => decodeCommand(body(encodeCommand("PING", new Uint8Array(1)))))).toBe("protocol-violation");
  });
});

describe("subscriptions", () => {
  test("prefix match, the empty topic matches all, counted like libzmq", () => {
    const s = new Subscriptions();
    expect(s.matches(text("kv@a"))).toBe(false);
    s.add(text("kv@"));
    s.add(text("kv@"));
    expect(s.matches(text("kv@host@model"))).toBe(true);
    expect(s.matches(text("kv"))).toBe(false);
    s.remove(text("kv@"));
    expect(s.matches(text("kv@x"))).toBe(true);
    s.remove(text("kv@"));
    expect(s.matches(text("kv@x"))).toBe(false);
    s.remove(text("never"));
    s.add(new Uint8Array(0));
    expect(s.matches(new Uint8Array(0))).toBe(true);
  });
});

describe("endpoints", () => {
  test("libzmq's spellings", () => {
    expect(parseTcpEndpoint("tcp://*:5557")).toEqual({ host: "0.0.0.0", port: 5557 });
    expect(parseTcpEndpoint("tcp://127.0.0.1:*")).toEqual({ host: "127.0.0.1", port: 0 });
    expect(parseTcpEndpoint("tcp://[::1]:5558")).toEqual({ host: "::1", port: 5558 });
    expect(parseTcpEndpoint("tcp://engine-3.local:5557")).toEqual({ host: "engine-3.local", port: 5557 });
    expect(formatTcpEndpoint("::1", 5)).toBe("tcp://[::1]:5");
    for (const bad of ["ipc:///tmp/x", "tcp://host", "tcp://host:99999", "tcp://:5557", "tcp://a b:1"])
      expect(() => parseTcpEndpoint(bad)).toThrow(/ZMQ TCP endpoint|out of range/);
  });
});

function queueOf(b: Uint8Array): ByteQueue {
  const q = new ByteQueue();
  q.push(b);
  return q;
}
