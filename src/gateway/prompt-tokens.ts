/**
 * The prompt's token ids for precise-prefix routing, from an engine's own
 * /tokenize (the chat template applied there, exactly as the generation
 * request will be), turned into token-block keys and cached. The request
 * waits for them at most `kv_events.tokenize.timeout_ms`, and routes
 * without them past it; a call that outlives the wait still fills the
 * cache for the next request.
 *
 * What is tokenized (and cached under the hash of its tokenize body), the
 * longest first, the first cached one used:
 * - the whole prompt (a repeated prompt hits);
 * - a chat's history — every message but the last, without the generation
 *   prompt: the shared system prompt or conversation of later requests;
 * - a single long text (a completion's prompt, a one-message chat): its
 *   head cut at kv_events.tokenize.cut_chars × 1, 2, 4 … characters, so a
 *   later request sharing a head finds the longest cut inside it (a chat's
 *   cut leaves the message open: continue_final_message).
 * On a miss the whole prompt is asked for (the request waits for it), the
 * others in the background, within kv_events.tokenize.max_inflight calls.
 * Skipped: prompts estimated under min_prompt_tokens, batches, embeddings,
 * requests naming a LoRA adapter, and models no endpoint with a live event
 * stream serves. A completion whose
 * prompt is token ids needs no call: its keys are computed as they are.
 */
import type { KvEventsConfig } from "../config/kv-events-config.ts";
import type { KvEventsMetrics } from "../metrics/kv-events-metrics.ts";
import type { Route, TokenizeSkip } from "../metrics/names.ts";
import { tokenBlockKeys } from "../scheduling/token-blocks.ts";

/** Keys kept per prompt: 8,192 blocks of 16 tokens (131,072 tokens) are more than a context holds. */
export const MAX_TOKEN_BLOCK_KEYS = 8_192;
/** A tokenize call still unanswered after this many time limits is abandoned. */
const ABANDON_AFTER_TIMEOUTS = 50;
/** Chat fields the engine's template reads besides the messages. */
const TEMPLATE_FIELDS = ["tools", "chat_template", "chat_template_kwargs", "documents"] as const;

type Keys = readonly number[];

interface Candidate {
  key: string;
  body: () => Record<string, unknown>;
}

/** An engine to ask: its base URL and the headers every request to it carries (its API key). */
interface TokenizeEndpoint {
  url: string;
  headers: Readonly<Record<string, string>>;
}

export interface TokenizeTarget {
  /** Whether some endpoint's events are followed at all (otherwise nothing is counted). */
  following(): boolean;
  /** A ready endpoint serving `model` whose event stream is live; undefined when none. */
  endpointFor(model: string): TokenizeEndpoint | undefined;
}

/** Nothing to tokenize at (no precise-prefix scorer configured). */
export const NO_TOKENIZE_TARGET: TokenizeTarget = Object.freeze({ following: () => false, endpointFor: () => undefined });

export class PromptTokenizer {
  /** Cache key → keys, least recently used first. */
  private readonly cache = new Map<string, Keys>();
  private cachedKeys = 0;
  private readonly inflight = new Map<string, Promise<Keys | undefined>>();

  constructor(
    private readonly config: KvEventsConfig["tokenize"],
    private readonly target: TokenizeTarget,
    private readonly metrics: KvEventsMetrics,
  ) {}

  /** Entries and keys cached (for tests and diagnostics). */
  get size(): { entries: number; keys: number } {
    return { entries: this.cache.size, keys: this.cachedKeys };
  }

  /**
   * The prompt's token-block keys: at once (cached, token ids, or nothing to
   * do), or a promise that settles within the time limit (undefined: route
   * without). `promptTokens` is the gateway's own estimate of its length.
   */
  keysFor(body: Record<string, unknown>, route: Route, model: string, promptTokens: number, loraAdapter = false): Keys | undefined | Promise<Keys | undefined> {
    if (route === "embeddings" || !this.target.following()) return undefined;
    // An adapter's blocks are keyed by the adapter too, and the index holds base-model blocks only: its keys would match blocks it cannot use.
    if (loraAdapter) return this.skip("lora_adapter");
    const engine = this.target.endpointFor(model);
    if (engine === undefined) return this.skip("no_live_stream");
    if (promptTokens < this.config.minPromptTokens) return this.skip("short");
    const prompt = body.prompt;
    if (route === "completions" && Array.isArray(prompt) && prompt.length > 0 && prompt.every((t) => typeof t === "number"))
      return tokenBlockKeys(prompt as number[], MAX_TOKEN_BLOCK_KEYS);
    const candidates = this.candidates(body, route, model);
    if (candidates === undefined) return this.skip("not_text");
    for (const c of candidates) {
      const hit = this.cache.get(c.key);
      if (hit !== undefined) {
        this.cache.delete(c.key);
        this.cache.set(c.key, hit);
        this.metrics.tokenized("hit");
        return hit;
      }
    }
    const [whole, ...heads] = candidates;
    const asked = this.ask(engine, whole!);
    for (const h of heads) void this.ask(engine, h);
    if (asked === undefined) {
      this.metrics.tokenized("busy");
      return undefined;
    }
    return this.within(asked);
  }

  private skip(reason: TokenizeSkip): undefined {
    this.metrics.skipped(reason);
    return undefined;
  }

  /** The whole prompt's answer, or undefined once the time limit passes (it still fills the cache when it comes). */
  private within(asked: Promise<Keys | undefined>): Promise<Keys | undefined> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const limit = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), this.config.timeoutMs)));
    return Promise.race([asked, limit]).then((r) => {
      clearTimeout(timer);
      if (r === "timeout") {
        this.metrics.tokenized("timeout");
        return undefined;
      }
      this.metrics.tokenized(r === undefined ? "error" : "miss");
      return r;
    });
  }

  /** One /tokenize call per candidate at a time; undefined when the budget of calls is spent. */
  private ask(engine: TokenizeEndpoint, c: Candidate): Promise<Keys | undefined> | undefined {
    const pending = this.inflight.get(c.key);
    if (pending) return pending;
    if (this.inflight.size >= this.config.maxInflight) return undefined;
    const p = this.call(engine, c).finally(() => this.inflight.delete(c.key));
    this.inflight.set(c.key, p);
    return p;
  }

  private async call(engine: TokenizeEndpoint, c: Candidate): Promise<Keys | undefined> {
    const t0 = performance.now();
    try {
      // Newer vLLM guards /tokenize with its --api-key too (every route outside its PUBLIC_ENDPOINTS).
      const res = await fetch(`${engine.url}/tokenize`, {
        method: "POST",
        headers: { ...engine.headers, "content-type": "application/json" },
        body: JSON.stringify(c.body()),
        signal: AbortSignal.timeout(this.config.timeoutMs * ABANDON_AFTER_TIMEOUTS),
      });
      const answer: unknown = res.ok ? await res.json() : undefined;
      const tokens = typeof answer === "object" && answer !== null ? (answer as { tokens?: unknown }).tokens : undefined;
      if (!Array.isArray(tokens) || !tokens.every((t) => typeof t === "number" && Number.isInteger(t)))
        throw new Error(`/tokenize answered ${res.status} without token ids`);
      this.metrics.tokenizeSeconds("ok", (performance.now() - t0) / 1000);
      const keys = tokenBlockKeys(tokens as number[], MAX_TOKEN_BLOCK_KEYS);
      this.remember(c.key, keys);
      return keys;
    } catch {
      this.metrics.tokenizeSeconds("error", (performance.now() - t0) / 1000);
      return undefined;
    }
  }

  private remember(key: string, keys: Keys): void {
    if (keys.length === 0 || this.cache.has(key)) return;
    this.cache.set(key, keys);
    this.cachedKeys += keys.length;
    for (const [k, v] of this.cache) {
      if (this.cachedKeys <= this.config.cacheBlocks) break;
      this.cache.delete(k);
      this.cachedKeys -= v.length;
    }
  }

  /** What may be tokenized for this request, the whole prompt first; undefined when it is not one text (a batch, odd content). */
  private candidates(body: Record<string, unknown>, route: Route, model: string): Candidate[] | undefined {
    const root = wyhash(model, 0n);
    const cuts = (text: string, seed: bigint, make: (head: string) => Record<string, unknown>): Candidate[] => {
      const out: Candidate[] = [];
      for (let c = this.config.cutChars; c < text.length; c *= 2)
        out.unshift(candidate(wyhash(`cut:${c}`, wyhash(text.slice(0, c), seed)), () => make(text.slice(0, c))));
      return out;
    };
    if (route === "completions") {
      const prompt = body.prompt;
      if (typeof prompt !== "string") return undefined;
      const seed = wyhash("completion", root);
      return [candidate(wyhash(prompt, seed), () => ({ model, prompt })), ...cuts(prompt, seed, (head) => ({ model, prompt: head }))];
    }
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0) return undefined;
    const template: Record<string, unknown> = {};
    const flags: Record<string, unknown> = {};
    // The key chains each message's role and content (one pass over the prompt, no serialising): the history's key is a step of the whole's.
    let seed = wyhash("chat", root);
    for (const f of TEMPLATE_FIELDS) {
      if (body[f] === undefined) continue;
      template[f] = body[f];
      seed = wyhash(`${f}=${JSON.stringify(body[f])}`, seed);
    }
    let history = seed;
    for (let i = 0; i < messages.length; i++) {
      if (i === messages.length - 1) history = seed;
      const m: unknown = messages[i];
      if (typeof m !== "object" || m === null) return undefined;
      const { role, content } = m as Record<string, unknown>;
      seed = wyhash(typeof content === "string" ? content : JSON.stringify(content ?? null), wyhash(`${String(role)}\u0000`, seed));
    }
    for (const f of ["add_generation_prompt", "continue_final_message"] as const) if (body[f] !== undefined) flags[f] = body[f];
    const whole = candidate(wyhash(JSON.stringify(flags), seed), () => ({ model, messages, ...flags, ...template }));
    if (messages.length > 1)
      return [whole, candidate(wyhash("history", history), () => ({ model, messages: messages.slice(0, -1), add_generation_prompt: false, ...template }))];
    const only = messages[0] as Record<string, unknown>;
    if (typeof only.content !== "string") return [whole];
    return [
      whole,
      ...cuts(only.content, wyhash(`${String(only.role)}\u0000`, history), (head) => ({
        model,
        messages: [{ ...only, content: head }],
        add_generation_prompt: false,
        continue_final_message: true,
        ...template,
      })),
    ];
  }
}

function wyhash(text: string, seed: bigint): bigint {
  return Bun.hash.wyhash(text, seed);
}

/** A cache key (a chained hash of what would be tokenized) and the /tokenize body, built only when asked for. */
function candidate(hash: bigint, body: () => Record<string, unknown>): Candidate {
  return { key: hash.toString(36), body };
}
