/** Measured drain rate of an admission queue (grants per second, time-decayed EWMA) and the Retry-After it implies. */

const DEFAULT_DRAIN_HALF_LIFE_MS = 5_000;
/** Retry-After when nothing has drained yet (no rate to extrapolate from). */
const DEFAULT_RETRY_AFTER_S = 1;
/** Retry-After never promises more than this: the rate can recover long before. */
const MAX_RETRY_AFTER_S = 60;
/**
 * The shortest window the estimate divides by. Without it the very first grant would read
 * as an enormous rate (one event over ~0 ms).
 */
const MIN_WINDOW_MS = 1_000;

export class DrainRate {
  /** Time constant of the decay, ms (half-life / ln 2). */
  private readonly tauMs: number;
  /** Sum of grants, each weighted by exp(-(last - t)/tau), as of `last`. */
  private weighted = 0;
  private last = Number.NaN;
  private first = Number.NaN;

  constructor(halfLifeMs: number = DEFAULT_DRAIN_HALF_LIFE_MS) {
    if (!(halfLifeMs > 0)) throw new RangeError(`halfLifeMs must be > 0, got ${halfLifeMs}`);
    this.tauMs = halfLifeMs / Math.LN2;
  }

  /** n grants happened at `now` (ms). */
  record(now: number, n = 1): void {
    if (Number.isNaN(this.last)) {
      this.first = now;
      this.last = now;
    }
    this.weighted = this.decayedTo(now) + n;
    this.last = Math.max(this.last, now);
  }

  /**
   * Grants per second. A steady rate r accumulates a weighted sum of r·tau·(1 − e^(−T/tau))
   * after T ms of history, so dividing by that factor gives an unbiased estimate from the
   * first second on instead of one that creeps up over several half-lives.
   */
  perSecond(now: number): number {
    if (Number.isNaN(this.last)) return 0;
    const history = Math.max(now - this.first, MIN_WINDOW_MS);
    const windowMs = this.tauMs * -Math.expm1(-history / this.tauMs);
    return (this.decayedTo(now) / windowMs) * 1000;
  }

  /**
   * Whole seconds until `depth` queued requests drain at the measured rate, for Retry-After
   * (RFC 9110 §10.2.3 takes integer seconds): DEFAULT_RETRY_AFTER_S when nothing drains,
   * at least 1, at most MAX_RETRY_AFTER_S.
   */
  retryAfterSeconds(now: number, depth: number): number {
    const rate = this.perSecond(now);
    if (!(rate > 0)) return DEFAULT_RETRY_AFTER_S;
    const seconds = Math.round(Math.max(0, depth) / rate);
    return Math.min(MAX_RETRY_AFTER_S, Math.max(1, seconds));
  }

  /** The weighted sum as of `now`; a clock that steps back does not inflate it. */
  private decayedTo(now: number): number {
    const dt = Math.max(0, now - this.last);
    return this.weighted * Math.exp(-dt / this.tauMs);
  }
}
