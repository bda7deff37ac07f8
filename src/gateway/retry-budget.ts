/**
 * A retry budget (as in Envoy and Finagle): each first attempt deposits
 * `ratio` of a retry, each retry withdraws one, so retries add at most that
 * fraction of load when an engine fails, instead of multiplying it. A small
 * per-second floor keeps retries possible at low traffic.
 */
const MAX_DEPOSIT = 100;

export class RetryBudget {
  private balance = 0;
  private floorTokens: number;
  private floorAt: number;

  constructor(
    private readonly ratio: number,
    private readonly minPerS: number,
    /** When the floor starts filling (the fleet twin passes its virtual time). */
    startedAt = Date.now(),
  ) {
    this.floorTokens = minPerS;
    this.floorAt = startedAt;
  }

  /** Called once per client request. */
  deposit(): void {
    this.balance = Math.min(MAX_DEPOSIT, this.balance + this.ratio);
  }

  /** Whether a retry may go now; withdraws it when so. */
  tryWithdraw(now = Date.now()): boolean {
    if (this.balance >= 1) {
      this.balance -= 1;
      return true;
    }
    this.floorTokens = Math.min(this.minPerS, this.floorTokens + ((now - this.floorAt) / 1000) * this.minPerS);
    this.floorAt = now;
    if (this.floorTokens >= 1) {
      this.floorTokens -= 1;
      return true;
    }
    return false;
  }
}
