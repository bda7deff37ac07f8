/**
 * KvTopicListener: the gateway's one bound SUB socket that engines' PUB
 * sockets connect to (llm-d's topology; vLLM connects its publisher when
 * `--kv-events-config`'s endpoint names a host). Every message is handed to
 * the stream attached for its exact topic (`kv@<pod>@<model>` as llm-d
 * writes it); the others are counted by reason and dropped, never held.
 *
 * A publisher that connects says nothing of who it is (a PUB sends no
 * identity), so a stream is tied to the connection its topic last arrived
 * on: a batch of its topic on another connection is a new connection of
 * that stream (the engine restarted or reconnected: the subscriber replays
 * what it missed), and the connection closing disconnects it. Until its
 * first batch on a new connection, a stream reads as disconnected.
 */

import type { KvUnroutedReason } from "../../shared/kv-event-stats.ts";
import { BoundSubSocket } from "../zmq/bound-sub-socket.ts";
import { InboundBudget, type ZmtpConnection } from "../zmq/connection.ts";
import type { KvLiveFeed, KvLiveFeedEvents } from "./subscriber.ts";

/** Unparsed and partial-message bytes all publishers of the bound socket hold together (a flood of connections holds this, not connections × the message bound). */
const LISTEN_INBOUND_BYTES = 256 * 1024 * 1024;

/** No engine's topic is this long (llm-d's is `kv@` + a pod name or address + `@` + a model name); a longer first frame is nobody's. */
const MAX_TOPIC_BYTES = 512;

interface KvTopicListenerOptions {
  /** Largest message taken from a publisher. */
  maxMessageBytes: number;
  /** Publishers connected at once; one more is closed on arrival (with maxMessageBytes, what a flood of connections can make us hold). */
  maxPublishers: number;
  heartbeat: { intervalMs: number; timeoutMs: number } | undefined;
}

interface KvTopicListenerEvents {
  unrouted(reason: KvUnroutedReason): void;
}

interface Route {
  events: KvLiveFeedEvents;
  /** The connection the topic last arrived on, while it is open. */
  conn: ZmtpConnection | undefined;
  connections: number;
  reading: boolean;
}

export class KvTopicListener {
  private readonly socket: BoundSubSocket;
  private readonly routes = new Map<string, Route>();
  private readonly decoder = new TextDecoder("utf-8", { fatal: false });

  /** Binds now; throws if the address is taken or is not a tcp:// endpoint. */
  constructor(endpoint: string, options: KvTopicListenerOptions, events: KvTopicListenerEvents) {
    this.socket = new BoundSubSocket(
      endpoint,
      [""],
      {
        maxMessageBytes: options.maxMessageBytes,
        maxConnections: options.maxPublishers,
        heartbeat: options.heartbeat,
        inboundBudget: new InboundBudget(Math.max(LISTEN_INBOUND_BYTES, 2 * options.maxMessageBytes)),
      },
      {
        message: (conn, frames) => {
          if (frames.length !== 3) {
            events.unrouted("malformed");
            return;
          }
          const topic = frames[0]!;
          const route = topic.length <= MAX_TOPIC_BYTES ? this.routes.get(this.decoder.decode(topic)) : undefined;
          if (route === undefined) {
            events.unrouted("unknown-topic");
            return;
          }
          if (route.conn !== conn) {
            route.conn = conn;
            route.connections++;
            if (!route.reading) conn.setReading(false);
            route.events.connected();
          }
          route.events.message(frames);
        },
        disconnected: (conn, reason, detail) => {
          for (const route of this.routes.values()) {
            if (route.conn !== conn) continue;
            route.conn = undefined;
            route.events.disconnected(reason, detail);
          }
        },
      },
    );
  }

  /** As bound. */
  get endpoint(): string {
    return this.socket.endpoint;
  }

  get publishers(): number {
    return this.socket.connectionCount;
  }

  get refusedConnections(): number {
    return this.socket.refusedConnections;
  }

  /** Whether a stream is attached for this topic. */
  has(topic: string): boolean {
    return this.routes.has(topic);
  }

  /** The live feed of one topic (a KvEventSubscriber's `feed`); throws if another stream has it. */
  attach(topic: string, events: KvLiveFeedEvents): KvLiveFeed {
    if (this.routes.has(topic)) throw new Error(`topic ${JSON.stringify(topic)} is already followed`);
    const route: Route = { events, conn: undefined, connections: 0, reading: true };
    this.routes.set(topic, route);
    const routes = this.routes;
    return {
      get connected() {
        return route.conn?.isReady ?? false;
      },
      get dialAttempts() {
        return route.connections;
      },
      get lastHeardAtMs() {
        return route.conn?.isReady ? route.conn.lastHeardAtMs : undefined;
      },
      setReading(reading: boolean) {
        route.reading = reading;
        route.conn?.setReading(reading);
      },
      close() {
        if (routes.get(topic) === route) routes.delete(topic);
        if (!route.reading) route.conn?.setReading(true);
        route.conn = undefined;
      },
    };
  }

  close(): void {
    this.socket.close();
    this.routes.clear();
  }
}
