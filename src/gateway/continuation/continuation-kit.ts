/**
 * What continuing a stream takes, per API (this file for chat and
 * completions, responses-continuation.ts for the Responses API): whether a
 * request can be continued exactly, the body that continues it, a tracker of
 * what went out, and the rewriter of each continuation (a continuation that
 * breaks too hands its own state to the next). StreamRecovery runs the same
 * way whichever kit it holds.
 */
import type { Route } from "../../metrics/names.ts";
import type { ScannedEvent } from "../proxy/sse-scanner.ts";
import type { Usage } from "../request/exchange.ts";
import { ContinuationRewriter } from "./chunk-rewriter.ts";
import { type Continuability, continuable, continuationBody } from "./continuation-body.ts";
import { ResponsesTracker, responsesContinuable, responsesContinuationBody } from "./responses-continuation.ts";
import { type ResumePoint, type StreamIdentity, StreamTracker } from "./stream-tracker.ts";

type Body = Readonly<Record<string, unknown>>;
type Before = { text: string; tokens: number };

/** A continuation's events, rewritten into the client's one stream. */
export interface ContinuationSegment {
  /** The honest usage of the whole answer, once the continuation's usage went through. */
  readonly usage: Usage | undefined;
  rewrite(event: ScannedEvent): Uint8Array | undefined;
  resumePoint(): ResumePoint;
  /** The segment of a continuation of this one, from `before`. */
  segment(before: Before): ContinuationSegment;
}

/** What went out of the original stream. */
export interface ContinuationTracker {
  observeData(event: Uint8Array): void;
  resumePoint(): ResumePoint;
  segment(before: Before): ContinuationSegment;
}

export interface ContinuationKit {
  continuable(body: Body): Continuability;
  /** The continuation's body, or undefined when the token limit is spent. */
  body(original: Body, text: string, tokens: number, model?: string): string | undefined;
  tracker(): ContinuationTracker;
}

class ChatSegment extends ContinuationRewriter implements ContinuationSegment {
  constructor(
    private readonly route: Route,
    identity: StreamIdentity,
    before: Before,
  ) {
    super(route, identity, before);
  }

  segment(before: Before): ContinuationSegment {
    return new ChatSegment(this.route, this.identity, before);
  }
}

class ChatTracker extends StreamTracker implements ContinuationTracker {
  constructor(private readonly route: Route) {
    super(route);
  }

  segment(before: Before): ContinuationSegment {
    return new ChatSegment(this.route, this.identity!, before);
  }
}

function chatKit(route: Route): ContinuationKit {
  return {
    continuable: (body) => continuable(body, route),
    body: (original, text, tokens, model) => continuationBody(original, route, text, tokens, model),
    tracker: () => new ChatTracker(route),
  };
}

const RESPONSES: ContinuationKit = {
  continuable: responsesContinuable,
  body: responsesContinuationBody,
  tracker: () => new ResponsesTracker(),
};

/** The kit of `route` (chat's and completions' for every other route: they are not continuable). */
export function continuationKit(route: Route): ContinuationKit {
  return route === "responses" ? RESPONSES : chatKit(route);
}
