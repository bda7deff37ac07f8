/**
 * Per-endpoint circuit breakers on the main thread, which sees every upstream
 * failure first-hand. State lives in the endpoint table so the scheduler's
 * circuit-closed filter reads it without a message: closed → open after
 * `failureThreshold` consecutive failures → half-open after the open period,
 * when the scheduler grants exactly one probe (half-open → probing) → closed
 * on the probe's success, open again (for twice as long, up to 8×) on failure.
 */
import { CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, CIRCUIT_PROBING, EndpointTable, I } from "../shared/endpoint-table.ts";

const MAX_OPEN_MULTIPLIER = 8;
const STATE_NAMES = ["closed", "open", "half_open", "probing"] as const;
export type CircuitStateName = (typeof STATE_NAMES)[number];

export class CircuitBreakers {
  private readonly failures: number[];
  private readonly multiplier: number[];
  private readonly timers: (ReturnType<typeof setTimeout> | undefined)[];

  constructor(
    private readonly table: EndpointTable,
    private readonly opts: { failureThreshold: number; openMs: number },
    private readonly onTransition: (index: number, state: CircuitStateName) => void = () => {},
  ) {
    this.failures = new Array<number>(table.rows).fill(0);
    this.multiplier = new Array<number>(table.rows).fill(1);
    this.timers = new Array(table.rows).fill(undefined);
  }

  /** A new endpoint in this slot: closed, no failures counted. */
  reset(index: number): void {
    clearTimeout(this.timers[index]);
    this.timers[index] = undefined;
    this.failures[index] = 0;
    this.multiplier[index] = 1;
    this.table.setInt(index, I.CIRCUIT, CIRCUIT_CLOSED);
  }

  state(index: number): CircuitStateName {
    return STATE_NAMES[this.table.getInt(index, I.CIRCUIT)] ?? "closed";
  }

  success(index: number): void {
    this.failures[index] = 0;
    const s = this.table.getInt(index, I.CIRCUIT);
    if (s === CIRCUIT_PROBING || s === CIRCUIT_HALF_OPEN) {
      this.multiplier[index] = 1;
      this.set(index, CIRCUIT_CLOSED);
    }
  }

  failure(index: number): void {
    const n = (this.failures[index] ?? 0) + 1;
    this.failures[index] = n;
    const s = this.table.getInt(index, I.CIRCUIT);
    if (s === CIRCUIT_PROBING) {
      this.multiplier[index] = Math.min(MAX_OPEN_MULTIPLIER, (this.multiplier[index] ?? 1) * 2);
      this.open(index, this.opts.openMs * (this.multiplier[index] ?? 1));
    } else if (s === CIRCUIT_CLOSED && n >= this.opts.failureThreshold) {
      this.open(index, this.opts.openMs);
    }
  }

  /** A probe ended with no verdict (the client left): let another request probe. */
  abandon(index: number): void {
    this.table.casInt(index, I.CIRCUIT, CIRCUIT_PROBING, CIRCUIT_HALF_OPEN);
  }

  /**
   * The engine asked us to back off (Retry-After): out of rotation for `ms`,
   * not counted as a failure, and back to closed (not half-open) afterwards.
   */
  coolDown(index: number, ms: number): void {
    if (this.table.getInt(index, I.CIRCUIT) !== CIRCUIT_CLOSED) return;
    this.open(index, ms, CIRCUIT_CLOSED);
  }

  private open(index: number, ms: number, after: number = CIRCUIT_HALF_OPEN): void {
    this.set(index, CIRCUIT_OPEN);
    clearTimeout(this.timers[index]);
    const timer = setTimeout(() => {
      this.timers[index] = undefined;
      if (this.table.getInt(index, I.CIRCUIT) === CIRCUIT_OPEN) this.set(index, after);
    }, ms);
    timer.unref?.();
    this.timers[index] = timer;
  }

  private set(index: number, state: number): void {
    this.table.setInt(index, I.CIRCUIT, state);
    this.onTransition(index, STATE_NAMES[state] ?? "closed");
  }

  stop(): void {
    for (const t of this.timers) clearTimeout(t);
  }
}
