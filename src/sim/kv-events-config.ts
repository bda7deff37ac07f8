/**
 * `--kv-events-config`: vLLM's KVEventsConfig (vllm/config/kv_events.py) as
 * JSON, with its keys and defaults. The publisher is "zmq" when events are
 * enabled and none is named, "null" (nothing published) otherwise. Like
 * vLLM's ZmqEventPublisher, the sim binds its PUB socket when the endpoint
 * has a wildcard (`*` or `::`) and connects to any other (a gateway's bound
 * SUB, as in llm-d); the replay ROUTER always binds. Pure.
 */
import { z } from "zod";
import { parseTcpEndpoint } from "../engines/zmq/endpoint.ts";

/** vLLM's defaults. */
const DEFAULT_KV_EVENTS_ENDPOINT = "tcp://*:5557";
const DEFAULT_KV_EVENTS_BUFFER_STEPS = 10_000;
const DEFAULT_KV_EVENTS_HWM = 100_000;
const DEFAULT_KV_EVENTS_MAX_QUEUE_SIZE = 100_000;

const kvEventsConfigSchema = z.strictObject({
  enable_kv_cache_events: z.boolean().default(false),
  publisher: z.enum(["null", "zmq"]).nullable().default(null),
  endpoint: z.string().default(DEFAULT_KV_EVENTS_ENDPOINT),
  replay_endpoint: z.string().nullable().default(null),
  buffer_steps: z.int().min(1).max(10_000_000).default(DEFAULT_KV_EVENTS_BUFFER_STEPS),
  hwm: z.int().min(1).max(100_000_000).default(DEFAULT_KV_EVENTS_HWM),
  max_queue_size: z.int().min(1).default(DEFAULT_KV_EVENTS_MAX_QUEUE_SIZE),
  topic: z.string().default(""),
});

/** What the sim publishes with, once enabled and with the zmq publisher. */
export interface SimKvEventsConfig {
  endpoint: string;
  /** Connect the PUB socket to `endpoint` (it names a host) rather than bind it (a wildcard). */
  connect: boolean;
  replayEndpoint: string | undefined;
  bufferSteps: number;
  hwm: number;
  topic: string;
}

/** The flag's value → the publisher's settings, or undefined when nothing is published; throws Error with the key at fault. */
export function parseKvEventsConfig(json: string): SimKvEventsConfig | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch (err) {
    throw new Error(`not JSON: ${err instanceof Error ? err.message : String(err)}`);
  }
  const r = kvEventsConfigSchema.safeParse(raw);
  if (!r.success) throw new Error(r.error.issues.map((i) => `${i.path.join(".") || "(value)"}: ${i.message}`).join("; "));
  const c = r.data;
  const publisher = c.publisher ?? (c.enable_kv_cache_events ? "zmq" : "null");
  if (!c.enable_kv_cache_events || publisher === "null") return undefined;
  // vLLM's heuristic, word for word: "bind if wildcard / * present, else connect".
  const connect = !c.endpoint.includes("*") && !c.endpoint.includes("::");
  for (const [key, value] of [
    ["endpoint", c.endpoint],
    ["replay_endpoint", c.replay_endpoint],
  ] as const) {
    if (value === null) continue;
    try {
      parseTcpEndpoint(value);
    } catch (err) {
      throw new Error(`${key}: ${err instanceof Error ? err.message : String(err)} (the sim-engine speaks tcp:// only)`);
    }
  }
  if (connect && parseTcpEndpoint(c.endpoint).port === 0)
    throw new Error("endpoint: a publisher that connects needs the port of the SUB it connects to, not 0");
  return { endpoint: c.endpoint, connect, replayEndpoint: c.replay_endpoint ?? undefined, bufferSteps: c.buffer_steps, hwm: c.hwm, topic: c.topic };
}
