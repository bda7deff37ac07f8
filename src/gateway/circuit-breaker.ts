/**
 * Circuit breakers on the main thread, which sees every upstream failure
 * first-hand. Each endpoint has one for itself (connect failures) and one per
 * served model (429s, 5xx, timeouts, broken streams: what one model of a
 * shared URL does says nothing about the others). State lives in the
 * endpoint table (field I.CIRCUIT, or a model's field from
 * modelCircuitField) so both threads' choosers read it without a message:
 * closed → open after `failureThreshold` consecutive failures → half-open
 * after the open period, when a chooser takes exactly one probe (half-open →
 * probing) → closed on the probe's success, open again on failure for twice
 * as long, up to `maxOpenMs`: a recovered upstream is never kept out for
 * minutes.
 */
import { DEFAULT_CIRCUIT_MAX_OPEN_MS } from "../config/defaults.ts";
import { CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, CIRCUIT_PROBING, EndpointTable, I, MAX_MODEL_CIRCUITS } from "../shared/endpoint-table.ts";

const STATE_NAMES = ["closed", "open", "half_open", "probing"] as const;
const MODEL_FIELDS = Array.from({ length: MAX_MODEL_CIRCUITS }, (_, p) => I.MODEL_CIRCUITS + p);
export type CircuitStateName = (typeof STATE_NAMES)[number];

/** One circuit's own bookkeeping (the state itself is in the table). */
interface Circuit {
  failures: number;
  /** The next open period, ms: doubles on a failed probe, capped at maxOpenMs. */
  openMs: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

export class CircuitBreakers {
  private readonly circuits = new Map<number, Circuit>();

  constructor(
    private readonly table: EndpointTable,
    private readonly opts: { failureThreshold: number; openMs: number; maxOpenMs?: number },
    /** `field`: I.CIRCUIT for the endpoint's own circuit, else its model's. */
    private readonly onTransition: (index: number, field: number, state: CircuitStateName) => void = () => {},
  ) {}

  private key(index: number, field: number): number {
    return index * (I.MODEL_CIRCUITS + MAX_MODEL_CIRCUITS) + field;
  }

  private circuit(index: number, field: number): Circuit {
    const k = this.key(index, field);
    let c = this.circuits.get(k);
    if (!c) this.circuits.set(k, (c = { failures: 0, openMs: this.opts.openMs, timer: undefined }));
    return c;
  }

  /** A new endpoint in this slot: every circuit closed, no failures counted. */
  reset(index: number): void {
    this.resetFields(index, [I.CIRCUIT, ...MODEL_FIELDS]);
  }

  /** The endpoint's model list changed: its model circuits no longer match their models; start them afresh. */
  resetModels(index: number): void {
    this.resetFields(index, MODEL_FIELDS);
  }

  private resetFields(index: number, fields: readonly number[]): void {
    for (const field of fields) {
      const k = this.key(index, field);
      const c = this.circuits.get(k);
      if (c) clearTimeout(c.timer);
      this.circuits.delete(k);
      this.table.setInt(index, field, CIRCUIT_CLOSED);
    }
  }

  state(index: number, field: number = I.CIRCUIT): CircuitStateName {
    return STATE_NAMES[this.table.getInt(index, field)] ?? "closed";
  }

  success(index: number, field: number = I.CIRCUIT): void {
    const c = this.circuit(index, field);
    c.failures = 0;
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_PROBING || s === CIRCUIT_HALF_OPEN) {
      c.openMs = this.opts.openMs;
      this.set(index, field, CIRCUIT_CLOSED);
    }
  }

  failure(index: number, field: number = I.CIRCUIT): void {
    const c = this.circuit(index, field);
    c.failures++;
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_PROBING) {
      c.openMs = Math.min(this.opts.maxOpenMs ?? DEFAULT_CIRCUIT_MAX_OPEN_MS, c.openMs * 2);
      this.open(index, field, c.openMs);
    } else if (s === CIRCUIT_CLOSED && c.failures >= this.opts.failureThreshold) {
      this.open(index, field, c.openMs);
    }
  }

  /** A probe ended with no verdict (the client left): let another request probe. */
  abandon(index: number, field: number = I.CIRCUIT): void {
    this.table.casInt(index, field, CIRCUIT_PROBING, CIRCUIT_HALF_OPEN);
  }

  /**
   * The engine asked us to back off (Retry-After): out of rotation for `ms`,
   * not counted as a failure, and back to closed (not half-open) afterwards.
   */
  coolDown(index: number, field: number, ms: number): void {
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_PROBING) this.abandon(index, field);
    else if (s !== CIRCUIT_CLOSED) return;
    this.open(index, field, ms, CIRCUIT_CLOSED);
  }

  private open(index: number, field: number, ms: number, after: number = CIRCUIT_HALF_OPEN): void {
    const c = this.circuit(index, field);
    this.set(index, field, CIRCUIT_OPEN);
    clearTimeout(c.timer);
    c.timer = setTimeout(() => {
      c.timer = undefined;
      if (this.table.getInt(index, field) === CIRCUIT_OPEN) this.set(index, field, after);
    }, ms);
    c.timer.unref?.();
  }

  private set(index: number, field: number, state: number): void {
    this.table.setInt(index, field, state);
    this.onTransition(index, field, STATE_NAMES[state] ?? "closed");
  }

  stop(): void {
    for (const c of this.circuits.values()) clearTimeout(c.timer);
  }
}
