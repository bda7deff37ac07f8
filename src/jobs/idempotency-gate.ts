/**
 * The idempotent-replay gate (after auth and quota, before the cache): a POST
 * with `Idempotency-Key` runs once per tenant and key; a retry with the same
 * body replays the recorded answer byte for byte without touching a GPU, the
 * same key with another body (or route) is a 422, and a retry while the first
 * still runs waits for it up to `idempotency.wait_ms`, then gets a 409 with
 * Retry-After (IETF draft-ietf-httpapi-idempotency-key-header gives 409 for
 * a concurrent duplicate; waiting first spares well-behaved clients that
 * retry on a timeout the error).
 */
import { createHash } from "node:crypto";
import type { IdempotencyConfig } from "../config/types.ts";
import { type BodyDeadlines, readBodyUpTo } from "../shared/bounded-body.ts";
import { LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";
import { recordResponse, replayResponse } from "../shared/recorded-response.ts";
import type { IdempotencyStore } from "./idempotency-store.ts";
import { asStorageError } from "./storage-errors.ts";

export const IDEMPOTENCY_HEADER = "idempotency-key";
/** Set on every replayed answer. */
export const REPLAY_HEADER = "x-llmgw-replay";

/** Printable ASCII, as Stripe and the IETF draft use; long enough for a UUID with a prefix. */
const KEY_RE = /^[\x21-\x7e]{1,255}$/;
const POLL_MS = 25;
/** Expired records are deleted at most this often, piggybacked on requests (no timer to own). */
const PURGE_EVERY_MS = 60_000;

export type IdempotencyCheck =
  /** No key (or not a POST): the gate does not apply. */
  | { kind: "none" }
  /** Send this instead of running the request. */
  | { kind: "replay"; response: Response }
  /** Run the request, then pass its response through `record` (it relays the same bytes); `abandon` if it throws before one exists. */
  | { kind: "run"; record: (res: Response) => Response; abandon: () => Promise<void> };

interface IdempotencyGateOptions {
  /** How long a running key stays locked if its gateway dies: the longest a request may take (deadlines.total_ms). */
  lockMs: number;
  now?: () => number;
}

export class IdempotencyGate {
  readonly #store: IdempotencyStore;
  readonly #cfg: IdempotencyConfig;
  readonly #lockMs: number;
  readonly #now: () => number;
  #lastPurgeMs = 0;
  /** Answers replayed since start (llmgw_idempotent_replays_total). */
  replays = 0;

  constructor(store: IdempotencyStore, cfg: IdempotencyConfig, opts: IdempotencyGateOptions) {
    this.#store = store;
    this.#cfg = cfg;
    this.#lockMs = opts.lockMs;
    this.#now = opts.now ?? Date.now;
  }

  /** `body` is the raw request body the gateway already read; `signal` ends a wait when the client leaves. */
  async check(req: Request, tenant: string, body: Uint8Array, signal?: AbortSignal): Promise<IdempotencyCheck> {
    const key = req.headers.get(IDEMPOTENCY_HEADER);
    if (key === null || req.method !== "POST") return { kind: "none" };
    if (!KEY_RE.test(key)) {
      throw new LlmgwError("INVALID_REQUEST", "Idempotency-Key must be 1 to 255 printable ASCII characters", { param: "Idempotency-Key" });
    }
    return this.checkFingerprint(
      req,
      tenant,
      createHash("sha256")
        .update(`${req.method}\u0000${new URL(req.url).pathname}\u0000`)
        .update(body)
        .digest("hex"),
      signal,
    );
  }

  /**
   * The same check for a handler that hashed the body as it streamed
   * (uploads: sha256 of method, NUL, path, NUL, body — as check() computes
   * it), run once the body is in and before anything is made visible.
   */
  async checkFingerprint(req: Request, tenant: string, fingerprint: string, signal?: AbortSignal): Promise<IdempotencyCheck> {
    const key = req.headers.get(IDEMPOTENCY_HEADER);
    if (key === null || req.method !== "POST") return { kind: "none" };
    if (!KEY_RE.test(key)) {
      throw new LlmgwError("INVALID_REQUEST", "Idempotency-Key must be 1 to 255 printable ASCII characters", { param: "Idempotency-Key" });
    }
    this.#maybePurge();
    const deadline = this.#now() + this.#cfg.waitMs;
    for (;;) {
      const now = this.#now();
      const held = await this.#store.begin(tenant, key, fingerprint, now, now + this.#lockMs).catch((err: unknown) => {
        // A full disk: the key cannot be held, so the request must not run (it could run twice); say why.
        throw asStorageError(err, "recording the Idempotency-Key");
      });
      if (held.kind === "started") return this.#run(tenant, key, held.token);
      if (held.fingerprint !== fingerprint) {
        throw new LlmgwError(
          "IDEMPOTENCY_KEY_REUSED",
          "This Idempotency-Key was used with a different request (body or route); use a new key for a new request.",
          {
            param: "Idempotency-Key",
          },
        );
      }
      if (held.kind === "completed") {
        this.replays++;
        return { kind: "replay", response: replayResponse(held.response, { [REPLAY_HEADER]: "true" }) };
      }
      if (now >= deadline || signal?.aborted) {
        throw new LlmgwError("IDEMPOTENCY_KEY_IN_USE", "A request with this Idempotency-Key is still running; retry once it has finished.", {
          param: "Idempotency-Key",
          retryAfterS: 1,
        });
      }
      await Bun.sleep(Math.min(POLL_MS, Math.max(1, deadline - now)));
    }
  }

  #run(tenant: string, key: string, token: string): IdempotencyCheck {
    const abandon = () => this.#store.abandon(tenant, key, token);
    return {
      kind: "run",
      abandon,
      record: (res) =>
        recordResponse(res, {
          maxBytes: this.#cfg.maxResponseBytes,
          onComplete: async (rec) => void (await this.#store.complete(tenant, key, token, rec, this.#now() + this.#cfg.ttlMs)),
          onAbandon: abandon,
        }),
    };
  }

  #maybePurge(): void {
    const now = this.#now();
    if (now - this.#lastPurgeMs < PURGE_EVERY_MS) return;
    this.#lastPurgeMs = now;
    this.#store
      .purgeExpired(now)
      .catch((err: unknown) => logger().warn({ err: err instanceof Error ? err.message : String(err) }, "purging idempotency records failed"));
  }
}

/** Uploads (POST /v1/files) stream their body to storage and run the gate themselves with the fingerprint they hashed on the way. */
function streamsItsBody(req: Request): boolean {
  return new URL(req.url).pathname === "/v1/files";
}

/**
 * For handlers that read the request themselves (the Files and Batches
 * routes): read the body once (at most `maxBodyBytes`), run the gate, and
 * give the handler an equivalent Request. Errors of the gate are thrown as
 * LlmgwError for the caller's usual error response.
 */
export async function handleIdempotently(
  gate: IdempotencyGate,
  req: Request,
  tenant: string,
  maxBodyBytes: number,
  handler: (req: Request) => Promise<Response>,
  deadlines?: BodyDeadlines,
): Promise<Response> {
  if (req.method !== "POST" || !req.headers.has(IDEMPOTENCY_HEADER) || streamsItsBody(req)) return handler(req);
  const body = await readBodyUpTo(req, maxBodyBytes, deadlines);
  if (body === undefined) throw new LlmgwError("BODY_TOO_LARGE", `request body exceeds the limit of ${maxBodyBytes} bytes`);
  const check = await gate.check(req, tenant, body, req.signal);
  if (check.kind === "replay") return check.response;
  const again = new Request(req.url, { method: req.method, headers: req.headers, body, signal: req.signal });
  if (check.kind === "none") return handler(again);
  try {
    return check.record(await handler(again));
  } catch (err) {
    await check.abandon();
    throw err;
  }
}
