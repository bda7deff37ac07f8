/**
 * The response-cache gate (after idempotent replay, before the shed check and
 * admission: a hit uses no GPU). Opt-in per model; deterministic requests
 * only; per-tenant keys; answers recorded while relayed (complete 2xx only)
 * into a store bounded by bytes. Every cacheable answer carries
 * `x-llmgw-cache: hit` or `miss`.
 */
import type { ResponseCacheConfig } from "../config/types.ts";
import { type RecordedResponse, recordResponse, replayResponse } from "../shared/recorded-response.ts";
import { type CacheRoute, responseCacheKey } from "./cache-key.ts";
import { LruByteCache } from "./lru-byte-cache.ts";

export const CACHE_HEADER = "x-llmgw-cache";

/** Entries behind an async interface, so a shared backend (Redis) can replace the in-process one. */
export interface ResponseCacheStore {
  get(key: string, nowMs: number): Promise<RecordedResponse | undefined>;
  set(key: string, value: RecordedResponse, expiresAtMs: number): Promise<void>;
  /** Bytes held, when the store can tell (a shared one may not). */
  readonly bytes?: number;
}

/** Per-entry overhead beyond the body: the key and headers, roughly. */
function entryBytes(key: string, r: RecordedResponse): number {
  let bytes = r.body.byteLength + key.length + 64;
  for (const [k, v] of r.headers) bytes += k.length + v.length;
  return bytes;
}

/** The embedded store: one process's memory, least recently used evicted first. */
export class MemoryResponseCacheStore implements ResponseCacheStore {
  readonly lru: LruByteCache<RecordedResponse>;
  constructor(maxBytes: number) {
    this.lru = new LruByteCache(maxBytes);
  }
  async get(key: string, nowMs: number): Promise<RecordedResponse | undefined> {
    return this.lru.get(key, nowMs);
  }
  async set(key: string, value: RecordedResponse, expiresAtMs: number): Promise<void> {
    this.lru.set(key, value, entryBytes(key, value), expiresAtMs);
  }
  get bytes(): number {
    return this.lru.bytes;
  }
}

export interface CacheLookup {
  tenant: string;
  route: CacheRoute;
  /** The model as the client named it (name or alias). */
  requestedModel: string;
  /** Its canonical name: a name and its aliases share entries. */
  model: string;
  body: Readonly<Record<string, unknown>>;
}

type CacheCheck =
  /** Not cacheable (model not opted in, or not deterministic): no header, nothing recorded. */
  | { kind: "bypass" }
  | { kind: "hit"; response: Response }
  /** Run the request and pass its answer through `record`: the same bytes, marked `miss`, stored when complete. */
  | { kind: "miss"; record: (res: Response) => Response };

export class ResponseCache {
  readonly #store: ResponseCacheStore;
  readonly #cfg: ResponseCacheConfig;
  readonly #models: ReadonlySet<string>;
  readonly #now: () => number;
  hits = 0;
  misses = 0;

  constructor(cfg: ResponseCacheConfig, store: ResponseCacheStore = new MemoryResponseCacheStore(cfg.maxBytes), now: () => number = Date.now) {
    this.#cfg = cfg;
    this.#store = store;
    this.#models = new Set(cfg.models);
    this.#now = now;
  }

  /** For llmgw_response_cache_* (bytes undefined when the store cannot tell). */
  stats(): { hits: number; misses: number; bytes: number | undefined } {
    return { hits: this.hits, misses: this.misses, bytes: this.#store.bytes };
  }

  /** True when no model is opted in: the gateway can skip the gate entirely. */
  get off(): boolean {
    return this.#models.size === 0;
  }

  async check(q: CacheLookup): Promise<CacheCheck> {
    if (!this.#models.has(q.model) && !this.#models.has(q.requestedModel)) return { kind: "bypass" };
    const key = responseCacheKey(q.tenant, q.route, q.model, q.body);
    if (key === undefined) return { kind: "bypass" };
    const found = await this.#store.get(key, this.#now());
    if (found !== undefined) {
      this.hits++;
      return { kind: "hit", response: replayResponse(found, { [CACHE_HEADER]: "hit" }) };
    }
    this.misses++;
    return {
      kind: "miss",
      record: (res) => {
        const out = recordResponse(res, {
          maxBytes: this.#cfg.maxEntryBytes,
          onComplete: (rec) => this.#store.set(key, rec, this.#now() + this.#cfg.ttlMs),
          onAbandon: () => {},
        });
        return withHeader(out, CACHE_HEADER, "miss");
      },
    };
  }
}

/** Responses from fetch have immutable headers; a copy around the same body takes one more. */
function withHeader(res: Response, name: string, value: string): Response {
  const headers = new Headers(res.headers);
  headers.set(name, value);
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers });
}
