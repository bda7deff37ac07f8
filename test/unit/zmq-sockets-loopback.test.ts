/** PUB/SUB and ROUTER/DEALER over loopback TCP: filtering, ZMTP 3.0 peers, high-water marks, reconnection, heartbeats, identities. */
import { afterEach, describe, expect, test } from "bun:test";
import { DealerSocket } from "../../src/engines/zmq/dealer-socket.ts";
import type { ZmtpCloseReason } from "../../src/engines/zmq/errors.ts";
import { encodeCommand } from "../../src/engines/zmq/frames.ts";
import { PubSocket } from "../../src/engines/zmq/pub-socket.ts";
import { RouterSocket } from "../../src/engines/zmq/router-socket.ts";
import { SubSocket } from "../../src/engines/zmq/sub-socket.ts";
import { waitUntil } from "../helpers/processes.ts";
import { dialRaw, freePort, listenRaw } from "../helpers/zmtp-raw-peer.ts";

const text = (s: string): Uint8Array => new TextEncoder().encode(s);
const str = (b: Uint8Array | undefined): string => new TextDecoder().decode(b);

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});
function track<T extends { close(): void }>(x: T): T {
  cleanups.push(() => x.close());
  return x;
}

describe("PUB/SUB", () => {
  test("prefix filtering at the publisher, multipart messages whole, subscriptions changed while connected", async () => {
    const pub = track(new PubSocket("tcp://127.0.0.1:0"));
    const got: string[][] = [];
    const sub = track(new SubSocket(`tcp://127.0.0.1:${pub.port}`, ["kv@"], {}, { message: (f) => got.push(f.map(str)) }));
    await waitUntil(() => pub.subscriptions()[0]?.length === 1, { what: "subscription" });
    expect(pub.send([text("kv@a"), text("1"), text("")])).toEqual({ delivered: 1, dropped: 0 });
    expect(pub.send([text("other"), text("2")])).toEqual({ delivered: 0, dropped: 0 });
    sub.subscribe("other");
    await waitUntil(() => pub.subscriptions()[0]?.length === 2, { what: "second subscription" });
    pub.send([text("other"), text("3")]);
    sub.unsubscribe("kv@");
    await waitUntil(() => pub.subscriptions()[0]?.length === 1, { what: "cancel" });
    pub.send([text("kv@b"), text("4")]);
    pub.send([text("other"), text("5")]);
    await waitUntil(() => got.length === 3, { what: "messages" });
    expect(got).toEqual([
      ["kv@a", "1", ""],
      ["other", "3"],
      ["other", "5"],
    ]);
  });

  test("a publisher takes ZMTP 3.0 subscription messages and 3.1 commands alike", async () => {
    const pub = track(new PubSocket("tcp://127.0.0.1:0"));
    const old = await dialRaw(pub.port, { socketType: "SUB", minor: 0 });
    const modern = await dialRaw(pub.port, { socketType: "SUB" });
    cleanups.push(
      () => old.close(),
      () => modern.close(),
    );
    await Promise.all([old.ready, modern.ready]);
    old.send([new Uint8Array([1, ...text("a")])]);
    modern.write(encodeCommand("SUBSCRIBE", text("b")));
    await waitUntil(() => pub.subscriptions().flat().length === 2, { what: "both subscriptions" });
    for (const t of ["a1", "b1", "c1"]) pub.send([text(t)]);
    old.send([new Uint8Array([0, ...text("a")])]);
    await waitUntil(() => pub.subscriptions().flat().length === 1, { what: "3.0 cancel" });
    pub.send([text("a2")]);
    pub.send([text("b2")]);
    await waitUntil(() => modern.messages.length === 2, { what: "modern messages" });
    await Bun.sleep(50);
    expect(old.messages.map((m) => m.map(str))).toEqual([["a1"]]);
    expect(modern.messages.map((m) => m.map(str))).toEqual([["b1"], ["b2"]]);
  });

  test("a subscriber subscribes as its publisher's version expects: a message to 3.0, a command to 3.1", async () => {
    const v30 = await listenRaw({ socketType: "PUB", minor: 0 });
    const v31 = await listenRaw({ socketType: "PUB", minor: 1 });
    cleanups.push(v30.close, v31.close);
    track(new SubSocket(`tcp://127.0.0.1:${v30.port}`, ["kv"], {}, { message: () => {} }));
    track(new SubSocket(`tcp://127.0.0.1:${v31.port}`, ["kv"], {}, { message: () => {} }));
    await waitUntil(() => v30.peers[0]?.messages.length === 1 && v31.peers[0]?.commands.some((c) => c.name === "SUBSCRIBE"), { what: "subscriptions" });
    expect([...v30.peers[0]!.messages[0]![0]!]).toEqual([1, ...text("kv")]);
    expect(v31.peers[0]!.commands.find((c) => c.name === "SUBSCRIBE")).toEqual({ name: "SUBSCRIBE", topic: text("kv") });
    // A publisher that sends unsubscribed topics anyway is filtered at the subscriber.
    const got: string[] = [];
    const sub = track(new SubSocket(`tcp://127.0.0.1:${v31.port}`, ["kv"], {}, { message: (f) => got.push(str(f[0])) }));
    await waitUntil(() => sub.connected && v31.peers.length === 2, { what: "second connection" });
    v31.peers[1]!.send([text("zz")]);
    v31.peers[1]!.send([text("kv1")]);
    await waitUntil(() => got.length === 1, { what: "filtered message" });
    await Bun.sleep(30);
    expect(got).toEqual(["kv1"]);
  });

  test("a subscriber that stops reading loses whole messages at the high-water mark; the publisher and the others never wait", async () => {
    const pub = track(new PubSocket("tcp://127.0.0.1:0", { sendHwmMessages: 50 }));
    const slow = await dialRaw(pub.port, { socketType: "SUB" });
    cleanups.push(() => slow.close());
    await slow.ready;
    slow.write(encodeCommand("SUBSCRIBE", new Uint8Array(0)));
    let fast = 0;
    track(new SubSocket(`tcp://127.0.0.1:${pub.port}`, [""], {}, { message: () => fast++ }));
    await waitUntil(() => pub.subscriptions().length === 2 && pub.subscriptions().every((s) => s.length === 1), { what: "two subscribers" });
    slow.socket.pause();
    const payload = new Uint8Array(4096).fill(9);
    const total = 6000;
    for (let i = 0; i < total; i++) {
      const seq = new Uint8Array(4);
      new DataView(seq.buffer).setUint32(0, i);
      pub.send([seq, payload]);
      if (i % 25 === 24) await Bun.sleep(0);
    }
    await waitUntil(() => fast === total, { what: `all ${total} messages at the fast subscriber`, timeoutMs: 30_000 });
    expect(pub.droppedMessages).toBeGreaterThan(0);
    slow.socket.resume();
    await waitUntil(
      async () => {
        const before = slow.messages.length;
        await Bun.sleep(100);
        return slow.messages.length === before && before > 0;
      },
      { what: "slow subscriber drained", timeoutMs: 30_000 },
    );
    const seqs = slow.messages.map((m) => new DataView(m[0]!.buffer, m[0]!.byteOffset).getUint32(0));
    expect(slow.messages.every((m) => m.length === 2 && m[1]!.length === payload.length)).toBe(true);
    expect(seqs.length).toBe(total - pub.droppedMessages);
    expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
  }, 60_000);

  test("a subscriber dials before the publisher exists, and reconnects and resubscribes when it comes back", async () => {
    const port = await freePort();
    const got: string[] = [];
    const events: string[] = [];
    const sub = track(
      new SubSocket(
        `tcp://127.0.0.1:${port}`,
        ["t"],
        { reconnectIntervalMs: 20, reconnectIntervalMaxMs: 50 },
        {
          message: (f) => got.push(str(f[1])),
          connected: () => events.push("up"),
          disconnected: (reason) => events.push(`down:${reason}`),
        },
      ),
    );
    await Bun.sleep(120);
    expect(sub.dialAttempts).toBeGreaterThan(1);
    let pub = new PubSocket(`tcp://127.0.0.1:${port}`);
    await waitUntil(() => pub.subscriptions()[0]?.length === 1, { what: "first subscription" });
    pub.send([text("t"), text("before")]);
    await waitUntil(() => got.length === 1, { what: "first message" });
    pub.close();
    pub = track(new PubSocket(`tcp://127.0.0.1:${port}`));
    await waitUntil(() => pub.subscriptions()[0]?.length === 1, { what: "resubscription" });
    pub.send([text("t"), text("after")]);
    await waitUntil(() => got.length === 2, { what: "second message" });
    expect(got).toEqual(["before", "after"]);
    expect(events).toEqual(["up", "down:connection-lost", "up"]);
  });

  test("heartbeats: a publisher that answers PINGs keeps the connection; one that stays silent is dropped and redialed", async () => {
    const pub = track(new PubSocket("tcp://127.0.0.1:0"));
    const silent = await listenRaw({ socketType: "PUB" });
    cleanups.push(silent.close);
    const liveDrops: ZmtpCloseReason[] = [];
    const silentDrops: ZmtpCloseReason[] = [];
    const hb = { heartbeat: { intervalMs: 40, timeoutMs: 300 }, reconnectIntervalMs: 20 };
    const live = track(new SubSocket(`tcp://127.0.0.1:${pub.port}`, [""], hb, { message: () => {}, disconnected: (r) => liveDrops.push(r) }));
    // The raw peer swallows PINGs without a PONG: nothing ever arrives.
    track(new SubSocket(`tcp://127.0.0.1:${silent.port}`, [""], hb, { message: () => {}, disconnected: (r) => silentDrops.push(r) }));
    await Bun.sleep(1000);
    expect(live.connected).toBe(true);
    expect(Date.now() - live.lastHeardAtMs!).toBeLessThan(300);
    expect(liveDrops).toEqual([]);
    expect(silentDrops.length).toBeGreaterThan(0);
    expect(silentDrops.every((r) => r === "heartbeat-timeout")).toBe(true);
    expect(silent.peers.length).toBeGreaterThan(1);
  });
});

describe("ROUTER/DEALER", () => {
  test("identities: announced ones are kept, missing ones made up; replies are routed by them", async () => {
    const seen: string[] = [];
    const router = track(
      new RouterSocket(
        "tcp://127.0.0.1:0",
        {},
        {
          message: (id, frames) => {
            seen.push(`${Buffer.from(id).toString("hex")}:${frames.map(str).join("|")}`);
            router.send(id, [new Uint8Array(0), text(`re:${str(frames[1])}`)]);
          },
        },
      ),
    );
    const replies: Record<string, string[]> = { alice: [], anon: [] };
    const connected = { alice: false, anon: false };
    const alice = track(
      new DealerSocket(
        `tcp://127.0.0.1:${router.port}`,
        { identity: text("alice") },
        { message: (f) => replies.alice!.push(f.map(str).join("|")), connected: () => (connected.alice = true) },
      ),
    );
    const anon = track(
      new DealerSocket(
        `tcp://127.0.0.1:${router.port}`,
        {},
        { message: (f) => replies.anon!.push(f.map(str).join("|")), connected: () => (connected.anon = true) },
      ),
    );
    await waitUntil(() => connected.alice && connected.anon, { what: "dealers" });
    expect(alice.send([new Uint8Array(0), text("hi")])).toBe("queued");
    expect(anon.send([new Uint8Array(0), text("yo")])).toBe("queued");
    await waitUntil(() => replies.alice!.length === 1 && replies.anon!.length === 1, { what: "replies" });
    expect(replies).toEqual({ alice: ["|re:hi"], anon: ["|re:yo"] });
    expect(seen).toContain(`${Buffer.from("alice").toString("hex")}:|hi`);
    const generated = seen.find((s) => s.endsWith(":|yo"))!;
    expect(generated).toMatch(/^00[0-9a-f]{8}:/);
    expect(router.send(text("nobody"), [text("x")])).toBe("unroutable");
  });

  test("a second peer with a taken identity is refused", async () => {
    const router = track(new RouterSocket("tcp://127.0.0.1:0", {}, { message: () => {} }));
    const first = await dialRaw(router.port, { socketType: "DEALER", identity: text("dup") });
    cleanups.push(() => first.close());
    await waitUntil(() => router.peerCount === 1, { what: "first peer" });
    const second = await dialRaw(router.port, { socketType: "DEALER", identity: text("dup") });
    cleanups.push(() => second.close());
    await waitUntil(() => second.closed, { what: "second peer closed" });
    expect(router.peerCount).toBe(1);
    expect(first.closed).toBe(false);
  });

  test("a sender waits for a peer that stops reading instead of dropping, and resumes when it reads again", async () => {
    const router = track(new RouterSocket("tcp://127.0.0.1:0", { sendHwmMessages: 20 }, { message: () => {} }));
    const dealer = await dialRaw(router.port, { socketType: "DEALER", identity: text("d") });
    cleanups.push(() => dealer.close());
    await waitUntil(() => router.peerCount === 1, { what: "peer" });
    dealer.socket.pause();
    const payload = new Uint8Array(64 * 1024);
    let sent = 0;
    let waits = 0;
    const total = 400;
    const sending = (async () => {
      while (sent < total) {
        const r = router.send(text("d"), [payload]);
        if (r === "queued") sent++;
        else {
          expect(r).toBe("over-hwm");
          waits++;
          expect(await router.waitForRoom(text("d"))).toBe(true);
        }
      }
    })();
    await waitUntil(() => waits > 0, { what: "the sender to hit the mark", timeoutMs: 20_000 });
    expect(sent).toBeLessThan(total);
    dealer.socket.resume();
    await sending;
    await waitUntil(() => dealer.messages.length === total, { what: "every message", timeoutMs: 30_000 });
  }, 60_000);
});
