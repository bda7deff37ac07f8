/**
 * KvEventPublisher: publishes KV-event batches as vLLM's ZmqEventPublisher
 * does (see wire.ts): a PUB socket, sequence numbers from 0, the last
 * `bufferSteps` payloads kept, and an optional ROUTER answering replay
 * requests. For an engine (the sim-engine) to speak vLLM's protocol.
 */
import { PubSocket } from "../zmq/pub-socket.ts";
import { RouterSocket } from "../zmq/router-socket.ts";
import { encodeKvEventBatch, type KvEventLayout } from "./encode.ts";
import type { KvCacheEvent, KvEventBatch } from "./model.ts";
import { ReplayBuffer } from "./replay-buffer.ts";
import { parseReplayRequest, publishedFrames, replayBatchFrames, replayEndFrames } from "./wire.ts";

/** vLLM's `buffer_steps` default. */
const DEFAULT_REPLAY_BUFFER_STEPS = 10_000;
/** vLLM's `hwm` default for its PUB socket. */
const DEFAULT_PUBLISHER_HWM_MESSAGES = 100_000;
/** A replay request is two small frames; nothing bigger is read from a replay client. */
const REPLAY_MAX_INBOUND_BYTES = 1024;

interface KvEventPublisherOptions {
  /** Where the PUB socket binds: `tcp://*:5557`, `tcp://127.0.0.1:0` (port 0: any free one); or, with `connect`, the SUB it connects to. */
  endpoint: string;
  /** Connect the PUB socket to a bound SUB (a gateway's, as in llm-d) instead of binding it; the replay ROUTER still binds. */
  connect?: boolean;
  /** Where the replay ROUTER binds; without it, nobody can ask for missed batches. */
  replayEndpoint?: string;
  /** First frame of every message; subscribers filter on its prefix. Default "". */
  topic?: string;
  /** Batches kept for replay. Default 10,000 (vLLM's). */
  bufferSteps?: number;
  /** Messages queued per subscriber before it starts losing them. Default 100,000 (vLLM's). */
  hwmMessages?: number;
  /** Stamped on batches published without a rank, as vLLM stamps its own. Default 0. */
  dataParallelRank?: number;
  /** Event layout on the wire. Default "tagged-map" (current vLLM). */
  layout?: KvEventLayout;
  /** Replay replies carry the topic frame as current vLLM's do (default true), or not, as earlier releases. */
  replayTopicFrame?: boolean;
}

interface KvEventPublisherStats {
  /** Batches published; also the next sequence number. */
  published: number;
  /** Messages lost by subscribers at their high-water mark. */
  droppedToSlowSubscribers: number;
  subscribers: number;
  replayRequests: number;
  /** Replay requests that were not `["", 8-byte seq]`, ignored. */
  invalidReplayRequests: number;
  replayedBatches: number;
}

export class KvEventPublisher {
  private readonly pub: PubSocket;
  private readonly router: RouterSocket | undefined;
  private readonly buffer: ReplayBuffer;
  private readonly topic: Uint8Array;
  private readonly rank: number;
  private readonly layout: KvEventLayout;
  private readonly replayTopicFrame: boolean;
  private seq = 0;
  private closed = false;
  private readonly counts = { replayRequests: 0, invalidReplayRequests: 0, replayedBatches: 0 };

  /** Binds both sockets now (or starts dialing the SUB); throws on a bad endpoint or a port in use. */
  constructor(options: KvEventPublisherOptions) {
    this.topic = new TextEncoder().encode(options.topic ?? "");
    this.rank = options.dataParallelRank ?? 0;
    this.layout = options.layout ?? "tagged-map";
    this.replayTopicFrame = options.replayTopicFrame ?? true;
    this.buffer = new ReplayBuffer(options.bufferSteps ?? DEFAULT_REPLAY_BUFFER_STEPS);
    this.pub = new PubSocket(options.endpoint, { sendHwmMessages: options.hwmMessages ?? DEFAULT_PUBLISHER_HWM_MESSAGES, connect: options.connect });
    try {
      this.router =
        options.replayEndpoint === undefined
          ? undefined
          : new RouterSocket(
              options.replayEndpoint,
              { maxMessageBytes: REPLAY_MAX_INBOUND_BYTES },
              { message: (identity, frames) => void this.serveReplay(identity, frames) },
            );
    } catch (err) {
      this.pub.close();
      throw err;
    }
  }

  /** The PUB endpoint as bound (`tcp://0.0.0.0:port` for a wildcard), or as dialed. */
  get endpoint(): string {
    return this.pub.endpoint;
  }

  get replayEndpoint(): string | undefined {
    return this.router?.endpoint;
  }

  /** Publish `events` stamped with `ts` (seconds since the epoch); returns the batch's sequence number. */
  publish(events: KvCacheEvent[], ts: number = Date.now() / 1000): number {
    return this.publishBatch({ ts, events, dataParallelRank: null });
  }

  /** Publish a whole batch; a null rank gets this publisher's. Returns the sequence number. */
  publishBatch(batch: KvEventBatch): number {
    if (this.closed) throw new Error("KvEventPublisher is closed");
    const payload = encodeKvEventBatch({ ...batch, dataParallelRank: batch.dataParallelRank ?? this.rank }, this.layout);
    const seq = this.seq++;
    this.pub.send(publishedFrames(this.topic, seq, payload));
    this.buffer.push(seq, payload);
    return seq;
  }

  stats(): KvEventPublisherStats {
    return { published: this.seq, droppedToSlowSubscribers: this.pub.droppedMessages, subscribers: this.pub.subscriberCount, ...this.counts };
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pub.close();
    this.router?.close();
  }

  /**
   * Send every buffered batch from the requested sequence on, then the end
   * marker. Unlike libzmq's ROUTER, which drops what exceeds its high-water
   * mark, a long replay waits for the client to read.
   */
  private async serveReplay(identity: Uint8Array, frames: Uint8Array[]): Promise<void> {
    const router = this.router!;
    const start = parseReplayRequest(frames);
    if (start === undefined) {
      this.counts.invalidReplayRequests++;
      return;
    }
    this.counts.replayRequests++;
    const topic = this.replayTopicFrame ? this.topic : undefined;
    const send = async (reply: Uint8Array[]): Promise<boolean> => {
      for (;;) {
        const r = router.send(identity, reply);
        if (r === "queued") return true;
        if (r === "unroutable" || !(await router.waitForRoom(identity))) return false;
      }
    };
    for (const { seq, payload } of this.buffer.since(start)) {
      if (!(await send(replayBatchFrames(topic, seq, payload)))) return;
      this.counts.replayedBatches++;
    }
    await send(replayEndFrames(this.replayTopicFrame));
  }
}
