/**
 * What the sim-engine's added routes (Responses, tool calls, scoring,
 * pooling, transcription) get from the server (server.ts): the engine, the
 * configuration, the request limits, and the server's bookkeeping of open
 * answers and readiness. Routes are modules of their own, wired into the
 * server's fetch handler by path (routes/extra-routes.ts).
 */

import type { Closable, SinkOwner } from "../answer-stream.ts";
import type { SimLiveConfig, SimStaticConfig } from "../config.ts";
import type { Engine } from "../engine.ts";
import type { RequestLimits } from "../openai-request.ts";
import type { SeqAdapter } from "../sequence.ts";

export interface SimRouteContext {
  readonly engine: Engine;
  readonly fixed: SimStaticConfig;
  readonly live: SimLiveConfig;
  readonly limits: RequestLimits;
  /** Told when an answer is over (the server stops tracking it). */
  readonly owner: SinkOwner;
  /** Track an open answer (shut down with the server). */
  track(answer: Closable): void;
  /** 503 while dead or loading, as the server's own routes answer. */
  notReady(): Response | undefined;
  /** Count a generation request (the server's requests_total). */
  counted(): void;
  /** The LoRA adapter a request names as its model; undefined for a served model's name, or with LoRA off. */
  adapter(model: string): SeqAdapter | undefined;
}

type BunServer = ReturnType<typeof Bun.serve>;

export type { BunServer };
