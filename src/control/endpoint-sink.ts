/**
 * The seam between the control plane and the gateway's endpoint table: the
 * fleet manager hands over replicas that are Ready and takes them back; the
 * gateway implements this over its dynamic endpoint table.
 */
import type { KvEventsSource } from "../protocol/kv-events-messages.ts";
import type { ReplicaLoad } from "./autoscale/signals.ts";

export interface ManagedEndpoint {
  /** The replica id (stable across gateway restarts). */
  id: string;
  /** The engine's OpenAI base URL (the rank-0 shard's endpoint as its agent advertises it). */
  url: string;
  pool: string;
  models: string[];
  engine: "auto" | "vllm" | "sglang";
  /** Node of the rank-0 shard. */
  node: string;
  /** UUIDs of the GPUs behind it (all shards), for DCGM fault matching. */
  gpuIds: string[];
  /** Where its engine publishes KV-cache events (the rank-0 shard's, as its agent reports); absent: none. */
  kvEvents?: KvEventsSource;
  /** The gateway's environment variable holding the engine's API key (the model's api_key_env); absent: none. */
  apiKeyEnv?: string;
}

/** The LoRA adapters an endpoint's engine lists, runs and queues, as the gateway's health poll last saw them. */
export interface EndpointAdapters {
  listed: string[];
  running: string[];
  waiting: string[];
  /** Every GPU slot runs an adapter (distinct running adapters ≥ max_loras): another adapter's requests wait. */
  slotsFull: boolean;
}

export interface EndpointSink {
  /** A replica is Ready: start routing to it (idempotent by id). */
  addEndpoint(e: ManagedEndpoint): void;
  /** No new requests while draining; open streams finish. */
  setDraining(id: string, draining: boolean): void;
  /** Requests currently open on the endpoint (drain waits for 0 or the grace period). */
  inflight(id: string): number;
  /** Gone from rotation; requests still open on it finish and release correctly. */
  removeEndpoint(id: string): void;
  /**
   * Optional: whether the gateway's own health poll sees the endpoint ready
   * (health and models). A drain counts a replacement as serving only then,
   * so that taking the original out never leaves a gap; without it the
   * agent's report is taken.
   */
  ready?(id: string): boolean;
  /**
   * Optional: the replica is about to be stopped (a drain past its grace
   * period, a scale-down, a failure): streams still open on it are moved to
   * another replica now — continued there — rather than cut by
   * the stop. Returns how many were moved.
   */
  evict?(id: string): number;
  /**
   * Optional: the endpoint's LoRA adapters (undefined: not polled yet, or
   * nothing reported). Without it the fleet loads no adapters.
   */
  adapters?(id: string): EndpointAdapters | undefined;
  /** Optional: the endpoint's load as the gateway's health poll last saw it (undefined: not polled yet). Without it the autoscaler sizes without engine figures. */
  load?(id: string): ReplicaLoad | undefined;
}
