/**
 * The ZMQ messages of vLLM's KV-event publisher (ZmqEventPublisher in
 * vllm/distributed/kv_events.py). Pure.
 *
 * - PUB: `[topic, seq, payload]`, seq an 8-byte big-endian unsigned integer
 *   counting from 0 each time the publisher starts.
 * - Replay, DEALER → ROUTER: `["", start_seq]` (the empty delimiter a REQ
 *   socket would add); the ROUTER sees `[identity, "", start_seq]`.
 * - Replay, ROUTER → DEALER: each buffered batch with `seq >= start_seq` as
 *   `["", topic, seq, payload]` (current vLLM) or `["", seq, payload]`
 *   (earlier releases), then an end marker whose seq is -1 (eight 0xFF
 *   bytes) with an empty payload: `["", "", END, ""]` or `["", END, ""]`.
 */

const SEQ_BYTES = 8;
const EMPTY = new Uint8Array(0);

/** The -1 sequence that ends a replay. */
const END_OF_REPLAY_SEQUENCE = new Uint8Array(SEQ_BYTES).fill(0xff);

export function encodeSequence(seq: number): Uint8Array {
  if (!Number.isSafeInteger(seq) || seq < 0) throw new RangeError(`sequence must be a non-negative safe integer, got ${seq}`);
  const out = new Uint8Array(SEQ_BYTES);
  new DataView(out.buffer).setBigUint64(0, BigInt(seq));
  return out;
}

/** A sequence number, "end" for the -1 marker, or undefined when the frame is not one. */
export function decodeSequence(frame: Uint8Array): number | "end" | undefined {
  if (frame.length !== SEQ_BYTES) return undefined;
  const v = new DataView(frame.buffer, frame.byteOffset, SEQ_BYTES).getBigUint64(0);
  if (v === 0xffff_ffff_ffff_ffffn) return "end";
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
}

export function publishedFrames(topic: Uint8Array, seq: number, payload: Uint8Array): Uint8Array[] {
  return [topic, encodeSequence(seq), payload];
}

type PublishedMessage = { ok: true; topic: Uint8Array; seq: number; payload: Uint8Array } | { ok: false; error: string };

export function parsePublished(frames: readonly Uint8Array[]): PublishedMessage {
  if (frames.length !== 3) return { ok: false, error: `expected 3 frames [topic, seq, payload], got ${frames.length}` };
  const seq = decodeSequence(frames[1]!);
  if (typeof seq !== "number") return { ok: false, error: "the sequence frame is not an 8-byte sequence number" };
  return { ok: true, topic: frames[0]!, seq, payload: frames[2]! };
}

export function replayRequestFrames(startSeq: number): Uint8Array[] {
  return [EMPTY, encodeSequence(startSeq)];
}

/** The start sequence of a replay request as the ROUTER receives it (identity already removed), or undefined. */
export function parseReplayRequest(frames: readonly Uint8Array[]): number | undefined {
  if (frames.length !== 2 || frames[0]!.length !== 0) return undefined;
  const seq = decodeSequence(frames[1]!);
  return typeof seq === "number" ? seq : undefined;
}

/** One replayed batch as the ROUTER sends it after the peer's identity; `topic` undefined for the earlier two-frame form. */
export function replayBatchFrames(topic: Uint8Array | undefined, seq: number, payload: Uint8Array): Uint8Array[] {
  return topic === undefined ? [EMPTY, encodeSequence(seq), payload] : [EMPTY, topic, encodeSequence(seq), payload];
}

export function replayEndFrames(withTopicFrame: boolean): Uint8Array[] {
  return withTopicFrame ? [EMPTY, EMPTY, END_OF_REPLAY_SEQUENCE, EMPTY] : [EMPTY, END_OF_REPLAY_SEQUENCE, EMPTY];
}

type ReplayReply = { kind: "batch"; seq: number; payload: Uint8Array } | { kind: "end" } | { kind: "invalid"; error: string };

/** A reply as the DEALER receives it, in either vLLM form. */
export function parseReplayReply(frames: readonly Uint8Array[]): ReplayReply {
  if ((frames.length !== 3 && frames.length !== 4) || frames[0]!.length !== 0) {
    return { kind: "invalid", error: `expected ["", (topic,) seq, payload], got ${frames.length} frames` };
  }
  const seq = decodeSequence(frames[frames.length - 2]!);
  const payload = frames[frames.length - 1]!;
  if (seq === undefined) return { kind: "invalid", error: "the sequence frame is not an 8-byte sequence number" };
  if (seq === "end") return { kind: "end" };
  return { kind: "batch", seq, payload };
}
