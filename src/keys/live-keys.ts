/**
 * Live API keys in memory: a map from a secret's digest to what the key
 * grants, refreshed from the key store when its version moves (polled once a
 * second, so a key created or revoked on any gateway works or stops within
 * about a second everywhere), and each key's usage summed here and added to
 * the store once a second. Authenticating stays a Map lookup: nothing on the
 * request path waits for the store.
 */
import { QuotaLimiter } from "../admission/tenant-quota.ts";
import type { KeyMetrics } from "../metrics/key-metrics.ts";
import { logger } from "../shared/logger.ts";
import type { KeyStore, UsageDelta } from "./key-store.ts";
import type { LiveKeyRecord } from "./live-key.ts";

/** How often the store's version is read (and usage written). */
const LIVE_KEYS_REFRESH_MS = 1_000;

/** What a live key grants beyond its tenant and band: read by the model and quota gates and by the request's end. */
export interface KeyGrant {
  readonly id: string;
  /** The models (as the client names them, or what an alias resolves to) the key may use; undefined: every model. */
  readonly models: ReadonlySet<string> | undefined;
  /** The key's own requests/tokens per minute, enforced by this gateway; undefined: none. */
  readonly quota: QuotaLimiter | undefined;
  /** Count one finished request. */
  used(tokensIn: number, tokensOut: number, now: number): void;
}

interface Entry<L> {
  readonly ladder: L;
  /** When this secret stops working (a rotation's grace); Infinity: while the key lives. */
  readonly expiresMs: number;
}

interface LiveKeysOptions<L> {
  store: KeyStore;
  /** Principals of a key, built by the authenticator (its band ladder), so a hit allocates nothing. */
  ladder(tenant: string, maxBand: string | null, grant: KeyGrant): L;
  metrics: KeyMetrics;
  refreshMs?: number;
}

function limitsOf(r: LiveKeyRecord): string {
  return `${r.requests_per_minute ?? "-"}/${r.tokens_per_minute ?? "-"}`;
}

export class LiveKeys<L> {
  readonly #o: LiveKeysOptions<L>;
  #byDigest = new Map<string, Entry<L>>();
  /** Limiters by key id, kept across refreshes while the key's limits stay the same (a refresh must not refill a bucket). */
  #quotas = new Map<string, { limits: string; limiter: QuotaLimiter }>();
  #pending = new Map<string, UsageDelta>();
  #version: number | undefined;
  #timer: ReturnType<typeof setInterval> | undefined;
  #refreshing: Promise<void> | undefined;
  #flushing: Promise<void> | undefined;
  #active = 0;
  #lastError: string | undefined;

  constructor(opts: LiveKeysOptions<L>) {
    this.#o = opts;
  }

  get store(): KeyStore {
    return this.#o.store;
  }

  /** Live keys that authenticate now (known to this gateway). */
  get active(): number {
    return this.#active;
  }

  /** The hot path: the key's principals for a presented secret's digest, or undefined. */
  lookup(digest: string, now: number): L | undefined {
    const e = this.#byDigest.get(digest);
    return e === undefined || e.expiresMs <= now ? undefined : e.ladder;
  }

  /** Read the keys now, then follow the store each second. */
  async start(): Promise<void> {
    await this.refresh();
    this.#timer ??= setInterval(() => {
      void this.refresh();
      void this.flush();
    }, this.#o.refreshMs ?? LIVE_KEYS_REFRESH_MS);
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    await this.flush();
  }

  /** Read the keys again when the store's version moved (or `force`); a store away keeps the keys known (fail static). */
  refresh(force = false): Promise<void> {
    // One read at a time; a forced refresh (a change made through this gateway) waits for the one running, then reads.
    const run = async () => {
      try {
        const version = await this.#o.store.version();
        if (!force && version === this.#version) return;
        const records = await this.#o.store.list();
        this.#rebuild(records, Date.now());
        this.#version = version;
        this.#lastError = undefined;
      } catch (err) {
        const why = err instanceof Error ? err.message : String(err);
        if (why !== this.#lastError) logger().warn({ err: why }, "live keys: cannot read the key store; the keys known stay in force");
        this.#lastError = why;
      }
    };
    const next = (this.#refreshing ?? Promise.resolve()).then(run);
    this.#refreshing = next.finally(() => {
      if (this.#refreshing === next) this.#refreshing = undefined;
    });
    return next;
  }

  #rebuild(records: readonly LiveKeyRecord[], now: number): void {
    const byDigest = new Map<string, Entry<L>>();
    const quotas = new Map<string, { limits: string; limiter: QuotaLimiter }>();
    let active = 0;
    for (const r of records) {
      if (r.revoked_ms !== null) continue;
      const secrets = r.secrets.filter((s) => s.expires_ms === null || s.expires_ms > now);
      if (secrets.length === 0) continue;
      active++;
      const limits = limitsOf(r);
      let quota = this.#quotas.get(r.id);
      if (r.requests_per_minute === null && r.tokens_per_minute === null) quota = undefined;
      else if (quota === undefined || quota.limits !== limits) {
        quota = {
          limits,
          limiter: new QuotaLimiter(
            [{ name: r.id, requestsPerMinute: r.requests_per_minute ?? undefined, tokensPerMinute: r.tokens_per_minute ?? undefined }],
            "API key",
          ),
        };
      }
      if (quota !== undefined) quotas.set(r.id, quota);
      const grant: KeyGrant = {
        id: r.id,
        models: r.models === null ? undefined : new Set(r.models),
        quota: quota?.limiter,
        used: (tokensIn, tokensOut, at) => this.#used(r.id, tokensIn, tokensOut, at),
      };
      const ladder = this.#o.ladder(r.tenant, r.max_band, grant);
      for (const s of secrets) byDigest.set(s.sha256, { ladder, expiresMs: s.expires_ms ?? Number.POSITIVE_INFINITY });
    }
    this.#byDigest = byDigest;
    this.#quotas = quotas;
    this.#active = active;
  }

  #used(id: string, tokensIn: number, tokensOut: number, now: number): void {
    this.#o.metrics.used(id, tokensIn, tokensOut);
    const d = this.#pending.get(id);
    if (d === undefined) this.#pending.set(id, { requests: 1, tokensIn, tokensOut, lastUsedMs: now });
    else {
      d.requests++;
      d.tokensIn += tokensIn;
      d.tokensOut += tokensOut;
      if (now > d.lastUsedMs) d.lastUsedMs = now;
    }
  }

  /** Add the usage counted here since the last flush to the store; kept for the next flush when the store is away. */
  flush(): Promise<void> {
    const run = async () => {
      if (this.#pending.size === 0) return;
      const batch = this.#pending;
      this.#pending = new Map();
      try {
        await this.#o.store.addUsage(batch);
      } catch {
        // Merged back: at most one entry per key, so an outage grows nothing but the counts.
        for (const [id, d] of batch) {
          const now = this.#pending.get(id);
          if (now === undefined) this.#pending.set(id, d);
          else {
            now.requests += d.requests;
            now.tokensIn += d.tokensIn;
            now.tokensOut += d.tokensOut;
            now.lastUsedMs = Math.max(now.lastUsedMs, d.lastUsedMs);
          }
        }
      }
    };
    const next = (this.#flushing ?? Promise.resolve()).then(run);
    this.#flushing = next.finally(() => {
      if (this.#flushing === next) this.#flushing = undefined;
    });
    return next;
  }
}
