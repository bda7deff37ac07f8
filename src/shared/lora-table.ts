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

/** Adapters a row's recency list holds: enough for any max_loras up to it (past it, the list says "resident" for what it holds). */
export const RECENT = 32;
/** Words of a row: max_loras (-1: the engine reports no LoRA state), active adapters, the three bitmaps, the recency list (id + 1, 0 empty). */
const R = { MAX_LORAS: 0, ACTIVE: 1, REGISTERED: 2, RUNNING: 2 + WORDS, WAITING: 2 + 2 * WORDS, RECENT: 2 + 3 * WORDS } as const;
const ROW_STRIDE = 2 + 3 * WORDS + RECENT;

type AdapterSet = "registered" | "running" | "waiting";
const SET_BASE: Record<AdapterSet, number> = { registered: R.REGISTERED, running: R.RUNNING, waiting: R.WAITING };

export class LoraTable {
  readonly buffer: SharedArrayBuffer;
  private readonly rows: Int32Array;

  constructor(
    readonly maxEndpoints: number,
    buffer?: SharedArrayBuffer,
  ) {
    const rowInts = maxEndpoints * ROW_STRIDE;
    this.buffer = buffer ?? new SharedArrayBuffer(rowInts * 4);
    this.rows = new Int32Array(this.buffer, 0, rowInts);
    if (!buffer) for (let r = 0; r < maxEndpoints; r++) this.resetRow(r);
  }

  /** Nothing known: no adapters, no LoRA state (the health worker, when an endpoint takes the slot). */
  resetRow(row: number): void {
    const base = row * ROW_STRIDE;
    for (let w = 0; w < ROW_STRIDE; w++) Atomics.store(this.rows, base + w, 0);
    Atomics.store(this.rows, base + R.MAX_LORAS, -1);
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

  /** Adapter `id` was sent to, or seen running on, endpoint `row`: the front of its recency list. */
  touch(row: number, id: number): void {
    if (id < 0 || id >= MAX_ADAPTERS) return;
    const base = row * ROW_STRIDE + R.RECENT;
    const v = id + 1;
    if (Atomics.load(this.rows, base) === v) return;
    let i = 1;
    while (i < RECENT - 1 && Atomics.load(this.rows, base + i) !== v) i++;
    for (let j = i; j > 0; j--) Atomics.store(this.rows, base + j, Atomics.load(this.rows, base + j - 1));
    Atomics.store(this.rows, base, v);
  }

  /** Where `id` stands in `row`'s recency list (0 newest), or -1 when it is not there. */
  recency(row: number, id: number): number {
    if (id < 0 || id >= MAX_ADAPTERS) return -1;
    const base = row * ROW_STRIDE + R.RECENT;
    const v = id + 1;
    for (let i = 0; i < RECENT; i++) if (Atomics.load(this.rows, base + i) === v) return i;
    return -1;
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
