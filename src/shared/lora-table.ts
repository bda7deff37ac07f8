/**
 * What the gateway knows of each endpoint's LoRA adapters, in shared memory
 * so the main thread's fast path and the scheduler worker score adapters
 * from the same bits without a message: per endpoint row, the engine's
 * `max_loras`, how many distinct adapters it runs or queues, and three
 * bitmaps over adapter ids — registered (its /v1/models lists it), running
 * (requests with it in the batch, so it holds a GPU slot) and waiting
 * (requests with it in the engine's queue). Adapter ids index a name table
 * the health worker owns (AdapterNames); it writes every row (one writer);
 * the choosers write `lastRouted`, one word per adapter: the endpoint the
 * gateway last sent it to (row + 1, 0 for none), whose GPU slot likely
 * still holds it after its requests end (vLLM's metric says nothing of
 * idle adapters).
 */

/** Adapter names tracked; past it, further names are not scored (every endpoint looks the same for them). */
export const MAX_ADAPTERS = 1024;
const WORDS = MAX_ADAPTERS / 32;

/** Words of a row: max_loras (-1: the engine reports no LoRA state), active adapters, then the three bitmaps. */
const R = { MAX_LORAS: 0, ACTIVE: 1, REGISTERED: 2, RUNNING: 2 + WORDS, WAITING: 2 + 2 * WORDS } as const;
const ROW_STRIDE = 2 + 3 * WORDS;

export type AdapterSet = "registered" | "running" | "waiting";
const SET_BASE: Record<AdapterSet, number> = { registered: R.REGISTERED, running: R.RUNNING, waiting: R.WAITING };

export class LoraTable {
  readonly buffer: SharedArrayBuffer;
  private readonly rows: Int32Array;
  private readonly last: Int32Array;

  constructor(
    readonly maxEndpoints: number,
    buffer?: SharedArrayBuffer,
  ) {
    const rowInts = maxEndpoints * ROW_STRIDE;
    this.buffer = buffer ?? new SharedArrayBuffer((rowInts + MAX_ADAPTERS) * 4);
    this.rows = new Int32Array(this.buffer, 0, rowInts);
    this.last = new Int32Array(this.buffer, rowInts * 4, MAX_ADAPTERS);
    if (!buffer) for (let r = 0; r < maxEndpoints; r++) this.resetRow(r);
  }

  /** Nothing known: no adapters, no LoRA state (health, and main when a slot is reused). */
  resetRow(row: number): void {
    const base = row * ROW_STRIDE;
    for (let w = 0; w < ROW_STRIDE; w++) Atomics.store(this.rows, base + w, 0);
    Atomics.store(this.rows, base + R.MAX_LORAS, -1);
    for (let a = 0; a < MAX_ADAPTERS; a++) if (Atomics.load(this.last, a) === row + 1) Atomics.store(this.last, a, 0);
  }

  /** Replace one bitmap of a row with `ids` (the health worker only). */
  setAdapters(row: number, set: AdapterSet, ids: readonly number[]): void {
    const words = new Int32Array(WORDS);
    for (const id of ids) if (id >= 0 && id < MAX_ADAPTERS) words[id >>> 5]! |= 1 << (id & 31);
    const base = row * ROW_STRIDE + SET_BASE[set];
    for (let w = 0; w < WORDS; w++) Atomics.store(this.rows, base + w, words[w]!);
  }

  /** Add one adapter to a row's bitmap (the control plane after loading it, before the next poll sees it). */
  addAdapter(row: number, set: AdapterSet, id: number): void {
    if (id < 0 || id >= MAX_ADAPTERS) return;
    Atomics.or(this.rows, row * ROW_STRIDE + SET_BASE[set] + (id >>> 5), 1 << (id & 31));
  }

  has(row: number, set: AdapterSet, id: number): boolean {
    if (id < 0 || id >= MAX_ADAPTERS) return false;
    return (Atomics.load(this.rows, row * ROW_STRIDE + SET_BASE[set] + (id >>> 5)) & (1 << (id & 31))) !== 0;
  }

  /** Adapters in one of a row's bitmaps. */
  count(row: number, set: AdapterSet): number {
    const base = row * ROW_STRIDE + SET_BASE[set];
    let n = 0;
    for (let w = 0; w < WORDS; w++) {
      let v = Atomics.load(this.rows, base + w);
      while (v !== 0) {
        v &= v - 1;
        n++;
      }
    }
    return n;
  }

  /** The engine's LoRA state: max_loras and distinct adapters running or waiting; undefined max: not reported. */
  setState(row: number, maxLoras: number | undefined, active: number): void {
    const base = row * ROW_STRIDE;
    Atomics.store(this.rows, base + R.ACTIVE, active);
    Atomics.store(this.rows, base + R.MAX_LORAS, maxLoras ?? -1);
  }

  maxLoras(row: number): number | undefined {
    const v = Atomics.load(this.rows, row * ROW_STRIDE + R.MAX_LORAS);
    return v < 0 ? undefined : v;
  }

  active(row: number): number {
    return Atomics.load(this.rows, row * ROW_STRIDE + R.ACTIVE);
  }

  /** The gateway sent adapter `id` to endpoint `row` (both choosers). */
  setLastRouted(id: number, row: number): void {
    if (id >= 0 && id < MAX_ADAPTERS) Atomics.store(this.last, id, row + 1);
  }

  lastRouted(id: number): number | undefined {
    if (id < 0 || id >= MAX_ADAPTERS) return undefined;
    const v = Atomics.load(this.last, id);
    return v === 0 ? undefined : v - 1;
  }
}

/**
 * Adapter name → id, first come first numbered, at most MAX_ADAPTERS (the
 * health worker owns it and tells the main thread each new id). Names past
 * the limit get no id and are not tracked.
 */
export class AdapterNames {
  private readonly ids = new Map<string, number>();

  get size(): number {
    return this.ids.size;
  }

  get(name: string): number | undefined {
    return this.ids.get(name);
  }

  /** The id of `name`, numbering it when new; `fresh` collects the names numbered by this call. */
  idOf(name: string, fresh?: [string, number][]): number | undefined {
    let id = this.ids.get(name);
    if (id !== undefined) return id;
    if (this.ids.size >= MAX_ADAPTERS) return undefined;
    id = this.ids.size;
    this.ids.set(name, id);
    fresh?.push([name, id]);
    return id;
  }
}
