/** API keys → principals: Authorization: Bearer <key> → tenant and band (capped at the key's max band), synchronous and allocation-free on the hit path. */
import type { Config } from "../config/types.ts";
import { YAML_KEY_ID_PREFIX } from "../keys/live-key.ts";
import type { KeyGrant } from "../keys/live-keys.ts";
import { LlmgwError } from "../shared/errors.ts";

export interface Principal {
  /** "anonymous" when auth is off. */
  readonly tenant: string;
  /** Index into config.admission.bands of the band this request gets. */
  readonly band: number;
  /** The band's name (for logs/metrics). */
  readonly bandName: string;
  /** A live key's grant (its id, model allow-list, own limits, usage); absent for a config key and with auth off. */
  readonly key?: KeyGrant;
}

/** A config key as the keys API lists it: no secret, the digest's start as its id. */
interface ConfigKeyView {
  readonly id: string;
  readonly tenant: string;
  readonly maxBand: string;
}

/** Live keys as the authenticator consults them: a digest → principals lookup held in memory (src/keys/live-keys.ts). */
interface LiveKeyLookup {
  lookup(digest: string, now: number): readonly Principal[] | undefined;
}

const ANONYMOUS_TENANT = "anonymous";
const PRIORITY_HEADER = "x-llmgw-priority";

const MISSING_KEY_MESSAGE =
  "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
const MALFORMED_MESSAGE = "The Authorization header must use Bearer auth (i.e. Authorization: Bearer YOUR_KEY).";
// Never echo the key (OpenAI shows a masked one; a gateway log line or a proxy error page is no place for even that).
const UNKNOWN_KEY_MESSAGE = "Incorrect API key provided. Check the key this gateway's operator gave you.";

/**
 * Principals are built once per (tenant's max band, requested band), frozen and shared, so a request
 * allocates nothing here beyond the key's digest string.
 *
 * Band choice: a key may use its max band or any lower one (higher index). `x-llmgw-priority` asking for
 * a band above the key's max is not an error: it is capped at the max band, so a client that always
 * sends "interactive" keeps working under a key that only allows "standard". An unknown band name is a 400.
 * With auth off the anonymous tenant's max band is admission.defaultBand, with the same rule.
 */
export class Authenticator {
  #enabled: boolean;
  readonly #admission: Config["admission"];
  /** sha256 hex of a config key → principals indexed by band (entries below the key's max band hold the capped one). */
  #byDigest = new Map<string, readonly Principal[]>();
  #configKeys: readonly ConfigKeyView[] = [];
  /** Ladders of config keys and the anonymous tenant, shared by every key of the same tenant and max band. */
  readonly #ladders = new Map<string, readonly Principal[]>();
  readonly #anonymous: readonly Principal[];
  readonly #bandIndex = new Map<string, number>();
  readonly #bandNames: string;
  /** Live keys, consulted after the config keys; absent until the data plane attaches them. */
  #live: LiveKeyLookup | undefined;

  constructor(auth: Config["auth"], admission: Config["admission"]) {
    this.#enabled = auth.enabled;
    this.#admission = admission;
    admission.bands.forEach((b, i) => this.#bandIndex.set(b.name, i));
    this.#bandNames = admission.bands.map((b) => b.name).join(", ");
    this.setConfigKeys(auth.keys);
    this.#anonymous = this.#ladder(ANONYMOUS_TENANT, admission.defaultBand);
  }

  #ladder(tenant: string, maxBand: number, key?: KeyGrant): readonly Principal[] {
    const build = () =>
      Object.freeze(
        this.#admission.bands.map((_, i) => {
          const band = Math.max(i, maxBand);
          const bandName = this.#admission.bands[band]!.name;
          return Object.freeze(key === undefined ? { tenant, band, bandName } : { tenant, band, bandName, key });
        }),
      );
    if (key !== undefined) return build();
    const k = `${maxBand}\u0000${tenant}`;
    let out = this.#ladders.get(k);
    if (out === undefined) {
      out = build();
      this.#ladders.set(k, out);
    }
    return out;
  }

  /** Replace the config's keys (auth.keys) as a whole; live keys are another layer and stay as they are. */
  setConfigKeys(keys: Config["auth"]["keys"]): void {
    const byDigest = new Map<string, readonly Principal[]>();
    const views: ConfigKeyView[] = [];
    for (const key of keys) {
      // load.ts resolves a missing max_band to the default band; guard a hand-built config all the same.
      const maxBand = key.maxBand >= 0 && key.maxBand < this.#admission.bands.length ? key.maxBand : this.#admission.defaultBand;
      const digest = key.sha256.toLowerCase();
      byDigest.set(digest, this.#ladder(key.tenant, maxBand));
      views.push({ id: YAML_KEY_ID_PREFIX + digest.slice(0, 16), tenant: key.tenant, maxBand: this.#admission.bands[maxBand]!.name });
    }
    this.#byDigest = byDigest;
    this.#configKeys = views;
  }

  /** The config's keys as the keys API lists them. */
  configKeys(): readonly ConfigKeyView[] {
    return this.#configKeys;
  }

  /** Consult `live` for a key the config does not hold. */
  /** A configuration reload: whether keys are checked, and the YAML keys (the live keys stay attached). */
  reconfigure(auth: Config["auth"]): void {
    this.#enabled = auth.enabled;
    this.setConfigKeys(auth.keys);
  }

  attachLiveKeys(live: LiveKeyLookup): void {
    this.#live = live;
  }

  /** A live key's principals (built once per refresh of the key, so a request allocates nothing); an unknown band name is the default band. */
  liveLadder(tenant: string, maxBand: string | null, key: KeyGrant): readonly Principal[] {
    const idx = maxBand === null ? undefined : this.#bandIndex.get(maxBand);
    return this.#ladder(tenant, idx ?? this.#admission.defaultBand, key);
  }

  /** Whether `name` is a band (the keys API checks a live key's max_band). */
  hasBand(name: string): boolean {
    return this.#bandIndex.has(name);
  }

  /** Whether keys are checked at all (auth.enabled). */
  get enabled(): boolean {
    return this.#enabled;
  }

  /** Throws INVALID_API_KEY (401) for a missing, malformed or unknown key; INVALID_REQUEST (400) for an unknown band name. */
  authenticate(headers: Headers): Principal {
    const ladder = this.#enabled ? this.#keyLadder(headers.get("authorization")) : this.#anonymous;
    const wanted = headers.get(PRIORITY_HEADER);
    if (wanted === null) return ladder[0]!;
    // Band names are lowercase by schema, so matching case-insensitively is exact.
    const idx = this.#bandIndex.get(wanted.trim().toLowerCase());
    if (idx === undefined) {
      throw new LlmgwError("INVALID_REQUEST", `${PRIORITY_HEADER} must name a band: one of ${this.#bandNames}`, { param: PRIORITY_HEADER });
    }
    return ladder[idx]!;
  }

  #keyLadder(header: string | null): readonly Principal[] {
    if (header === null) throw new LlmgwError("INVALID_API_KEY", MISSING_KEY_MESSAGE);
    const h = header.trim();
    // "Bearer" alone: header values arrive trimmed, so "Bearer " with an empty key looks like this.
    if (h.length === 0 || h.toLowerCase() === "bearer") throw new LlmgwError("INVALID_API_KEY", MISSING_KEY_MESSAGE);
    // RFC 9110 §11.1: the scheme is case-insensitive.
    if (h.length < 8 || h.slice(0, 7).toLowerCase() !== "bearer ") throw new LlmgwError("INVALID_API_KEY", MALFORMED_MESSAGE);
    const key = h.slice(7).trim();
    // A Map lookup on the key's sha256 leaks nothing about the key through timing (the attacker controls the
    // input, not the digest). Bun.SHA256.hash measured ~170 ns vs ~650 ns for node:crypto createHash.
    const digest = Bun.SHA256.hash(key, "hex");
    const ladder = this.#byDigest.get(digest) ?? this.#live?.lookup(digest, Date.now());
    if (ladder === undefined) throw new LlmgwError("INVALID_API_KEY", UNKNOWN_KEY_MESSAGE);
    return ladder;
  }
}
