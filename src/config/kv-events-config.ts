/**
 * The KV-events config: where an endpoint's engine publishes vLLM's
 * KV-cache events (`endpoints[].kv_events`: a PUB socket the gateway
 * connects to, or a topic on the gateway's own bound SUB socket), and the
 * gateway-wide `kv_events` block — that socket (`listen`), the block
 * index's ceiling, when a stream counts as
 * stale, replay and heartbeat timing, and the request tokenization that
 * precise prefix routing needs. Wire schemas and validated types (the
 * resolution is kv-events-resolve.ts).
 */
import { z } from "zod";

/** Blocks of 16 tokens the gateway's index holds across every endpoint (about 20 bytes each in shared memory, ~100 in the KV-events worker). */
const DEFAULT_KV_INDEX_BLOCKS = 1_048_576;
/** An event stream not heard from for this long (not even a heartbeat reply) is stale: the estimate stands in for it. */
const DEFAULT_KV_STALE_AFTER_MS = 12_000;
/** Silence on the replay socket after which a replay counts as failed (the endpoint's index is dropped). */
const DEFAULT_KV_REPLAY_TIMEOUT_MS = 2_000;
/** PING a silent publisher this often (libzmq answers whatever its settings). */
const DEFAULT_KV_HEARTBEAT_INTERVAL_MS = 5_000;
/** A request waits at most this long for its prompt's token ids before it is routed without them. */
const DEFAULT_TOKENIZE_TIMEOUT_MS = 20;
/** Prompts estimated shorter than this (characters ÷ 4) are not tokenized: their prefix is not worth a round trip. */
const DEFAULT_TOKENIZE_MIN_PROMPT_TOKENS = 128;
/** Blocks of token ids the tokenize cache keeps (8 bytes each), least recently used evicted first. */
const DEFAULT_TOKENIZE_CACHE_BLOCKS = 1_048_576;
/** Tokenize calls in flight at once; past it a request is routed without token ids. */
const DEFAULT_TOKENIZE_MAX_INFLIGHT = 64;
/** The shortest cut of a long prompt that is tokenized for later requests sharing its head (then 2×, 4× …). */
const DEFAULT_TOKENIZE_CUT_CHARS = 4_096;

/** Publishers connected at once to the bound SUB socket (`kv_events.listen`); one more is closed on arrival. */
const DEFAULT_KV_LISTEN_MAX_PUBLISHERS = 256;

/** An engine's KV-event sockets (config `endpoints[].kv_events`, or a fleet replica's report). */
export interface KvEventsSource {
  /** The PUB socket the gateway connects to, `tcp://host:port`; null: the engine's PUB connects to the gateway's bound SUB (`kv_events.listen`) and its batches are told apart by `topic`. */
  endpoint: string | null;
  /** The replay ROUTER; null: none (every gap or reconnection then drops the endpoint's index). */
  replayEndpoint: string | null;
  /** With an endpoint: the topic prefix to subscribe to ("" for every message). Without: the engine's exact topic. */
  topic: string;
}

/** A topic as llm-d writes it (`kv@<pod>@<model>`): printable, no spaces or quotes, so it is the same bytes in the engine's flag, this file and the log. */
const TOPIC_PATTERN = /^[A-Za-z0-9._:/@+=~-]*$/;
const MAX_TOPIC_CHARS = 512;

/** tcp://host:port, as the gateway dials it (no wildcard). */
const zmqTcp = z.string().superRefine((s, ctx) => {
  const m = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s);
  if (!m || m[1] === "*") ctx.addIssue({ code: "custom", message: `expected a ZMQ address tcp://HOST:PORT, e.g. tcp://10.0.0.5:5557, got '${s}'` });
  else if (Number(m[2]) < 1 || Number(m[2]) > 65535) ctx.addIssue({ code: "custom", message: "expected a port from 1 to 65535" });
});

/** tcp://host:port for the gateway to bind: `*` or an address of this host, a fixed port (engines are told it). */
const zmqBind = z.string().superRefine((s, ctx) => {
  const m = /^tcp:\/\/(\*|\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(s);
  if (!m) ctx.addIssue({ code: "custom", message: `expected a ZMQ address to bind, tcp://*:PORT or tcp://ADDRESS:PORT, e.g. tcp://*:5557, got '${s}'` });
  else if (Number(m[2]) < 1 || Number(m[2]) > 65535) ctx.addIssue({ code: "custom", message: "expected a port from 1 to 65535 (engines connect to it)" });
});

export const endpointKvEventsSchema = z
  .object({
    /** The engine's PUB socket (vLLM's kv_events_config endpoint, as reachable from the gateway); absent: the engine connects to `kv_events.listen`. */
    endpoint: zmqTcp.optional(),
    /** Its replay ROUTER; without it every gap or reconnection drops the endpoint's index. */
    replay_endpoint: zmqTcp.optional(),
    /** The engine's topic: with `endpoint`, a prefix of it is enough ("" takes every message); without, its exact topic on the bound socket. */
    topic: z
      .string()
      .max(MAX_TOPIC_CHARS)
      .regex(TOPIC_PATTERN, "expected letters, digits and . _ : / @ + = ~ - only (e.g. kv@pod-1@meta-llama/Llama-3.1-8B)")
      .default(""),
  })
  .strict();

export const kvEventsSchema = z
  .object({
    /** Bind one SUB socket here for engines' publishers to connect to (llm-d's topology); endpoints name their `kv_events.topic`. */
    listen: zmqBind.optional(),
    /** Publishers connected to `listen` at once. */
    listen_max_publishers: z.number().int().min(1).max(65_536).default(DEFAULT_KV_LISTEN_MAX_PUBLISHERS),
    index_blocks: z.number().int().min(1_024).max(67_108_864).default(DEFAULT_KV_INDEX_BLOCKS),
    stale_after_ms: z.number().int().min(100).max(3_600_000).default(DEFAULT_KV_STALE_AFTER_MS),
    replay_timeout_ms: z.number().int().min(10).max(600_000).default(DEFAULT_KV_REPLAY_TIMEOUT_MS),
    heartbeat_interval_ms: z.number().int().min(0).max(600_000).default(DEFAULT_KV_HEARTBEAT_INTERVAL_MS),
    tokenize: z
      .object({
        timeout_ms: z.number().int().min(1).max(60_000).default(DEFAULT_TOKENIZE_TIMEOUT_MS),
        min_prompt_tokens: z.number().int().min(16).max(10_000_000).default(DEFAULT_TOKENIZE_MIN_PROMPT_TOKENS),
        cache_blocks: z.number().int().min(1_024).max(67_108_864).default(DEFAULT_TOKENIZE_CACHE_BLOCKS),
        max_inflight: z.number().int().min(1).max(10_000).default(DEFAULT_TOKENIZE_MAX_INFLIGHT),
        cut_chars: z.number().int().min(256).max(10_000_000).default(DEFAULT_TOKENIZE_CUT_CHARS),
      })
      .strict()
      .default({
        timeout_ms: DEFAULT_TOKENIZE_TIMEOUT_MS,
        min_prompt_tokens: DEFAULT_TOKENIZE_MIN_PROMPT_TOKENS,
        cache_blocks: DEFAULT_TOKENIZE_CACHE_BLOCKS,
        max_inflight: DEFAULT_TOKENIZE_MAX_INFLIGHT,
        cut_chars: DEFAULT_TOKENIZE_CUT_CHARS,
      }),
  })
  .strict();

export const KV_EVENTS_DEFAULTS = kvEventsSchema.parse({});

/** The validated `kv_events` block. */
export interface KvEventsConfig {
  /** The bound SUB socket's endpoint; null: none. */
  listen: string | null;
  listenMaxPublishers: number;
  indexBlocks: number;
  staleAfterMs: number;
  replayTimeoutMs: number;
  heartbeatIntervalMs: number;
  tokenize: { timeoutMs: number; minPromptTokens: number; cacheBlocks: number; maxInflight: number; cutChars: number };
}
