/**
 * Circuit breakers on the main thread, which sees every upstream failure
 * first-hand. Each endpoint has one for itself (connect failures) and one per
 * served model (429s, 5xx, timeouts, broken streams: what one model of a
 * shared URL does says nothing about the others). State lives in the
 * endpoint table (field I.CIRCUIT, or a model's field from
 * modelCircuitField) so both threads' choosers read it without a message:
 * closed → open after `failureThreshold` consecutive failures.
 *
 * With active probing (the default) an open circuit is tested by the gateway
 * itself, never by a client's request: `openMs` after opening, then every
 * `probe.intervalMs` while it fails, a one-token request of the route and
 * model that failed (circuit-probe.ts). Its success makes the circuit
 * half-open: the next request takes its single probe slot (half-open →
 * probing) and closes it on success; if no request comes, the next active
 * probe closes it. Recovery is noticed within an interval or so whatever the
 * outage's length, and does not depend on a client's request landing in a
 * window. A request that fails as the probe reopens it, probed again after
 * an interval.
 *
 * Without probing (or before a failure said what to probe with), the open
 * period ends by itself in half-open, and a failed probe request reopens it
 * for twice as long, up to `maxOpenMs`.
 */

import { DEFAULT_CIRCUIT_MAX_OPEN_MS } from "../config/defaults.ts";
import type { CircuitBreakerConfig } from "../config/types.ts";
import type { Route } from "../metrics/names.ts";
import { CIRCUIT_CLOSED, CIRCUIT_HALF_OPEN, CIRCUIT_OPEN, CIRCUIT_PROBING, type EndpointTable, I, MAX_MODEL_CIRCUITS } from "../shared/endpoint-table.ts";
import { REAL_TIMERS, type TimerHandle, type Timers } from "../shared/timers.ts";

const STATE_NAMES = ["closed", "open", "half_open", "probing"] as const;
const MODEL_FIELDS = Array.from({ length: MAX_MODEL_CIRCUITS }, (_, p) => I.MODEL_CIRCUITS + p);
export type CircuitStateName = (typeof STATE_NAMES)[number];

/**
 * The routes an active probe can imitate with one token: generation and
 * embeddings. A circuit opened by another route's failures (rerank, score,
 * tokenize …) is probed by a later generating failure, or else reopens by
 * the clock as without probing.
 */
export type ProbeRoute = Extract<Route, "chat" | "completions" | "embeddings" | "responses">;
const PROBE_ROUTES: ReadonlySet<Route> = new Set<ProbeRoute>(["chat", "completions", "embeddings", "responses"]);

/** What an active probe imitates: the route and model of the failure that counted last. */
export interface ProbeTarget {
  route: ProbeRoute;
  model: string;
}

/** The probe target for a failure of `route` on `model`; undefined when the route cannot be probed with one token. */
export function probeTargetOf(route: Route, model: string | undefined): ProbeTarget | undefined {
  return model !== undefined && PROBE_ROUTES.has(route) ? { route: route as ProbeRoute, model } : undefined;
}

/**
 * An active probe's verdict; `retryAfterMs`: the engine asked for a pause (a
 * 429) before the next one; `gone`: the endpoint left the registry, nothing
 * more to probe.
 */
export type ProbeVerdict = { ok: true } | { ok: false; retryAfterMs?: number; gone?: true };

/** Sends one active probe of circuit `field` of endpoint `index`; never throws. */
export type ProbeSender = (index: number, field: number, target: ProbeTarget) => Promise<ProbeVerdict>;

/** An attempt's verdict on its endpoint, as the circuits read it (the Exchange's AttemptVerdict). */
type CircuitVerdict = { kind: "healthy" } | { kind: "fault"; failure: string } | { kind: "cool_down"; failure: string; ms: number } | { kind: "neutral" };

/** The attempt's claim: its endpoint, the circuit of the model it was sent (-1: the endpoint's own), and the probe slot it took (-1: none). */
interface AttemptClaim {
  readonly index: number;
  readonly circuit: number;
  readonly probe: number;
}

type CircuitOptions = Pick<CircuitBreakerConfig, "failureThreshold" | "openMs"> & Partial<Pick<CircuitBreakerConfig, "maxOpenMs" | "probe">>;

/** One circuit's own bookkeeping (the state itself is in the table). */
interface Circuit {
  failures: number;
  /** Without probing, the next open period, ms: doubles on a failed probe, capped at maxOpenMs. */
  openMs: number;
  timer: TimerHandle | undefined;
  /** What an active probe sends (undefined: nothing failed with a route yet; the open period just ends). */
  target: ProbeTarget | undefined;
  /** Bumped whenever the circuit starts afresh: a probe that returns after that says nothing. */
  generation: number;
  /** An active probe is on its way: its return schedules the next; no second one starts meanwhile. */
  inFlight: boolean;
}

export class CircuitBreakers {
  private readonly circuits = new Map<number, Circuit>();
  private stopped = false;

  constructor(
    private readonly table: EndpointTable,
    private readonly opts: CircuitOptions,
    /** `field`: I.CIRCUIT for the endpoint's own circuit, else its model's. */
    private readonly onTransition: (index: number, field: number, state: CircuitStateName) => void = () => {},
    /** Active probes; without one (or with probing off) open circuits half-open by the clock. */
    private readonly sendProbe?: ProbeSender,
    /** Where the open periods and probe intervals are timed (the fleet twin passes its virtual clock's). */
    private readonly timers: Timers = REAL_TIMERS,
  ) {}

  private get probing(): boolean {
    return this.sendProbe !== undefined && this.opts.probe?.enabled === true;
  }

  private key(index: number, field: number): number {
    return index * (I.MODEL_CIRCUITS + MAX_MODEL_CIRCUITS) + field;
  }

  private circuit(index: number, field: number): Circuit {
    const k = this.key(index, field);
    let c = this.circuits.get(k);
    if (!c) this.circuits.set(k, (c = { failures: 0, openMs: this.opts.openMs, timer: undefined, target: undefined, generation: 0, inFlight: false }));
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
      if (c) {
        this.timers.clear(c.timer);
        c.generation++;
      }
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
    if (s === CIRCUIT_PROBING || s === CIRCUIT_HALF_OPEN) this.close(index, field, c);
  }

  /** A failure that counts against the circuit; `target`: what an active probe of it should send. */
  failure(index: number, field: number = I.CIRCUIT, target?: ProbeTarget): void {
    const c = this.circuit(index, field);
    c.failures++;
    if (target !== undefined) c.target = target;
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_PROBING) {
      // With active probing the next probe comes after an interval, never later: no doubling.
      if (this.probing && c.target !== undefined) this.open(index, field, this.opts.probe!.intervalMs);
      else {
        c.openMs = Math.min(this.opts.maxOpenMs ?? DEFAULT_CIRCUIT_MAX_OPEN_MS, c.openMs * 2);
        this.open(index, field, c.openMs);
      }
    } else if (s === CIRCUIT_CLOSED && c.failures >= this.opts.failureThreshold) {
      this.open(index, field, c.openMs);
    }
  }

  /**
   * An attempt ended: its verdict goes to the circuit it concerns. A connect
   * failure is the endpoint's; anything an engine did once it answered (a
   * 429, a 5xx, a timeout, a broken stream) is the model's. `target`: what
   * an active probe imitates when this failure opens the circuit.
   */
  attemptEnded(g: AttemptClaim, verdict: CircuitVerdict, target: ProbeTarget | undefined): void {
    const field =
      (verdict.kind === "fault" || verdict.kind === "cool_down") && verdict.failure === "connect" ? I.CIRCUIT : g.circuit < 0 ? I.CIRCUIT : g.circuit;
    switch (verdict.kind) {
      case "healthy":
        this.success(g.index, I.CIRCUIT);
        if (g.circuit >= 0) this.success(g.index, g.circuit);
        return;
      case "fault":
        if (g.probe >= 0 && g.probe !== field) this.abandon(g.index, g.probe);
        return this.failure(g.index, field, target);
      case "cool_down":
        if (g.probe >= 0 && g.probe !== field) this.abandon(g.index, g.probe);
        return this.coolDown(g.index, field, verdict.ms);
      case "neutral":
        if (g.probe >= 0) this.abandon(g.index, g.probe); // let another request probe
        return;
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

  private close(index: number, field: number, c: Circuit): void {
    this.timers.clear(c.timer);
    c.timer = undefined;
    c.failures = 0;
    c.openMs = this.opts.openMs;
    this.set(index, field, CIRCUIT_CLOSED);
  }

  /** Open for `ms`; then `after` by the clock (a cool-down), or an active probe decides (a failing circuit, when probing). */
  private open(index: number, field: number, ms: number, after: number = CIRCUIT_HALF_OPEN): void {
    const c = this.circuit(index, field);
    this.set(index, field, CIRCUIT_OPEN);
    const probe = after === CIRCUIT_HALF_OPEN && this.probing && c.target !== undefined;
    this.schedule(c, ms, () => {
      if (this.table.getInt(index, field) !== CIRCUIT_OPEN) return;
      if (probe) void this.probe(index, field, c);
      else this.set(index, field, after);
    });
  }

  private schedule(c: Circuit, ms: number, run: () => void): void {
    this.timers.clear(c.timer);
    if (this.stopped) return;
    c.timer = this.timers.set(() => {
      c.timer = undefined;
      run();
    }, ms);
  }

  /**
   * One active probe of an open or half-open circuit. Open: success makes it
   * half-open (a request confirms it; or the next probe closes it), failure
   * keeps it open. Half-open with nobody probing: success closes it, failure
   * reopens it. A request probing it now decides instead.
   */
  private async probe(index: number, field: number, c: Circuit): Promise<void> {
    if (c.inFlight) return;
    const generation = c.generation;
    c.inFlight = true;
    let verdict: ProbeVerdict;
    try {
      verdict = await this.sendProbe!(index, field, c.target!);
    } finally {
      c.inFlight = false;
    }
    if (c.generation !== generation || this.stopped) return; // the circuit started afresh meanwhile
    if (!verdict.ok && verdict.gone) return;
    const interval = this.opts.probe!.intervalMs;
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_CLOSED) return;
    if (verdict.ok) {
      if (s === CIRCUIT_OPEN) this.set(index, field, CIRCUIT_HALF_OPEN);
      else if (this.table.casInt(index, field, CIRCUIT_HALF_OPEN, CIRCUIT_CLOSED)) return this.closed(index, field, c);
    } else if (s !== CIRCUIT_PROBING) {
      if (s === CIRCUIT_HALF_OPEN) this.set(index, field, CIRCUIT_OPEN);
      const wait = Math.max(interval, verdict.retryAfterMs ?? 0);
      return this.schedule(c, wait, () => this.probeIfWaiting(index, field, c));
    }
    this.schedule(c, interval, () => this.probeIfWaiting(index, field, c));
  }

  /** The next probe, unless the circuit closed (a request succeeded) or reopened with its own timer. */
  private probeIfWaiting(index: number, field: number, c: Circuit): void {
    const s = this.table.getInt(index, field);
    if (s === CIRCUIT_OPEN || s === CIRCUIT_HALF_OPEN) void this.probe(index, field, c);
    else if (s === CIRCUIT_PROBING) this.schedule(c, this.opts.probe!.intervalMs, () => this.probeIfWaiting(index, field, c));
  }

  /** A compare-and-swap closed it: the bookkeeping and the transition. */
  private closed(index: number, field: number, c: Circuit): void {
    c.failures = 0;
    c.openMs = this.opts.openMs;
    this.onTransition(index, field, "closed");
  }

  private set(index: number, field: number, state: number): void {
    this.table.setInt(index, field, state);
    this.onTransition(index, field, STATE_NAMES[state] ?? "closed");
  }

  stop(): void {
    this.stopped = true;
    for (const c of this.circuits.values()) this.timers.clear(c.timer);
  }
}
