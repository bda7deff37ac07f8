/** Where an engine publishes vLLM's KV-cache events, and the typed messages between the main thread and the KV-events worker (workers/kv-events.ts). */

/** An engine's KV-event sockets (config `endpoints[].kv_events`, or a fleet replica's report). */
export interface KvEventsSource {
  /** The PUB socket: `tcp://host:port`. */
  endpoint: string;
  /** The replay ROUTER; null: none (every gap or reconnection then drops the endpoint's index). */
  replayEndpoint: string | null;
  /** Topic prefix to subscribe to ("" for every message). */
  topic: string;
}
