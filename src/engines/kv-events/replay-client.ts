/**
 * One replay request to a vLLM-style replay ROUTER: a DEALER of its own
 * (a fresh connection, so a late answer to an abandoned request can never be
 * mistaken for this one's), the 8-byte start sequence, then the batches until
 * the -1 end marker. Fails when nothing arrives for `inactivityTimeoutMs`
 * (connecting included), on a malformed reply, or when the ROUTER goes away
 * mid-answer.
 */
import { DealerSocket } from "../zmq/dealer-socket.ts";
import { parseReplayReply, replayRequestFrames } from "./wire.ts";

interface ReplayClientOptions {
  endpoint: string;
  fromSeq: number;
  inactivityTimeoutMs: number;
  maxMessageBytes?: number;
}

interface ReplayClientHandlers {
  batch(seq: number, payload: Uint8Array): void;
  end(): void;
  failed(detail: string): void;
}

export class ReplayClient {
  private readonly dealer: DealerSocket;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private done = false;

  constructor(options: ReplayClientOptions, handlers: ReplayClientHandlers) {
    const fail = (detail: string): void => {
      if (this.finish()) handlers.failed(detail);
    };
    const rearm = (): void => {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = setTimeout(() => fail(`nothing from the replay socket for ${options.inactivityTimeoutMs} ms`), options.inactivityTimeoutMs);
    };
    rearm();
    this.dealer = new DealerSocket(
      options.endpoint,
      { maxMessageBytes: options.maxMessageBytes, reconnectIntervalMs: Math.max(10, Math.floor(options.inactivityTimeoutMs / 10)) },
      {
        connected: () => {
          rearm();
          if (this.dealer.send(replayRequestFrames(options.fromSeq)) !== "queued") fail("could not send the replay request");
        },
        message: (frames) => {
          if (this.done) return;
          rearm();
          const reply = parseReplayReply(frames);
          switch (reply.kind) {
            case "batch":
              handlers.batch(reply.seq, reply.payload);
              return;
            case "end":
              if (this.finish()) handlers.end();
              return;
            case "invalid":
              fail(`malformed replay reply: ${reply.error}`);
              return;
            default: {
              const never: never = reply;
              throw new Error(`unhandled reply ${JSON.stringify(never)}`);
            }
          }
        },
        disconnected: (reason) => fail(`replay connection closed (${reason})`),
      },
    );
  }

  /** Stop reading the replay (false) until set back: the consumer is behind. */
  setReading(reading: boolean): void {
    if (!this.done) this.dealer.setReading(reading);
  }

  /** Abandon the request; no handler is called after this. */
  cancel(): void {
    this.finish();
  }

  /** True the first time: stop the timer and the socket. */
  private finish(): boolean {
    if (this.done) return false;
    this.done = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.dealer.close();
    return true;
  }
}
