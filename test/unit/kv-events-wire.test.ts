/** vLLM's KV-event ZMQ messages and the publisher's replay buffer, with literal bytes. */
import { describe, expect, test } from "bun:test";
import { ReplayBuffer } from "../../src/engines/kv-events/replay-buffer.ts";
import {
  decodeSequence,
  encodeSequence,
  parsePublished,
  parseReplayReply,
  parseReplayRequest,
  publishedFrames,
  replayBatchFrames,
  replayEndFrames,
  replayRequestFrames,
} from "../../src/engines/kv-events/wire.ts";

const hex = (frames: Uint8Array[]): string[] => frames.map((f) => Buffer.from(f).toString("hex"));
const text = (s: string): Uint8Array => new TextEncoder().encode(s);
const empty = new Uint8Array(0);

describe("sequence numbers", () => {
  test("8 bytes big-endian; -1 (all ones) is the end of a replay; anything else is not a sequence", () => {
    expect(Buffer.from(encodeSequence(258)).toString("hex")).toBe("0000000000000102");
    expect(decodeSequence(encodeSequence(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(decodeSequence(new Uint8Array(8).fill(0xff))).toBe("end");
    expect(decodeSequence(new Uint8Array(4))).toBeUndefined();
    expect(decodeSequence(Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe))).toBeUndefined();
    expect(() => encodeSequence(-1)).toThrow(RangeError);
  });
});

describe("messages", () => {
  test("PUB: [topic, seq, payload]", () => {
    expect(hex(publishedFrames(text("kv"), 1, text("p")))).toEqual(["6b76", "0000000000000001", "70"]);
    expect(parsePublished(publishedFrames(text("kv"), 7, text("p")))).toEqual({ ok: true, topic: text("kv"), seq: 7, payload: text("p") });
    expect(parsePublished([text("kv"), text("p")]).ok).toBe(false);
    expect(parsePublished([text("kv"), new Uint8Array(7), text("p")]).ok).toBe(false);
    expect(parsePublished([text("kv"), new Uint8Array(8).fill(0xff), text("p")]).ok).toBe(false);
  });

  test("replay request: the DEALER sends an empty delimiter and the start sequence; the ROUTER accepts nothing else", () => {
    expect(hex(replayRequestFrames(5))).toEqual(["", "0000000000000005"]);
    expect(parseReplayRequest(replayRequestFrames(5))).toBe(5);
    expect(parseReplayRequest([encodeSequence(5)])).toBeUndefined();
    expect(parseReplayRequest([text("x"), encodeSequence(5)])).toBeUndefined();
    expect(parseReplayRequest([empty, new Uint8Array(8).fill(0xff)])).toBeUndefined();
  });

  test("replay replies in both vLLM forms, with their end markers", () => {
    expect(hex(replayBatchFrames(text("kv"), 3, text("p")))).toEqual(["", "6b76", "0000000000000003", "70"]);
    expect(hex(replayBatchFrames(undefined, 3, text("p")))).toEqual(["", "0000000000000003", "70"]);
    expect(hex(replayEndFrames(true))).toEqual(["", "", "ffffffffffffffff", ""]);
    expect(hex(replayEndFrames(false))).toEqual(["", "ffffffffffffffff", ""]);
    for (const withTopic of [true, false]) {
      expect(parseReplayReply(replayBatchFrames(withTopic ? text("kv") : undefined, 3, text("p")))).toEqual({ kind: "batch", seq: 3, payload: text("p") });
      expect(parseReplayReply(replayEndFrames(withTopic))).toEqual({ kind: "end" });
    }
    expect(parseReplayReply([text("x"), encodeSequence(1), text("p")]).kind).toBe("invalid");
    expect(parseReplayReply([empty, text("seq"), text("p")]).kind).toBe("invalid");
    expect(parseReplayReply([empty, encodeSequence(1)]).kind).toBe("invalid");
  });
});

describe("replay buffer", () => {
  test("keeps the last N in order and answers from a sequence on", () => {
    const b = new ReplayBuffer(3);
    for (let s = 0; s < 5; s++) b.push(s, text(`p${s}`));
    expect(b.size).toBe(3);
    expect(b.since(0).map((x) => x.seq)).toEqual([2, 3, 4]);
    expect(b.since(3).map((x) => x.seq)).toEqual([3, 4]);
    expect(b.since(9)).toEqual([]);
    expect(() => b.push(4, text("again"))).toThrow(RangeError);
    expect(() => new ReplayBuffer(0)).toThrow(RangeError);
  });
});
