/**
 * Batch line results on their way to the store, written together: the
 * results of a short spell (at most `flushMs` after the first, or as soon as
 * `maxLines` wait) go in one call per batch, one transaction in the embedded
 * store. A commit writes every page it touched to SQLite's log, and lines
 * finishing one by one each rewrote the pages they share (the state index,
 * the batch's counters): measured on a 10,000-line embeddings batch, a
 * result written alone cost ~0.7 ms of the event loop, eight together
 * ~0.16 ms each. A result held here is not lost to a crash any more than a
 * line in flight: its line is still leased, and runs again.
 */
import { logger } from "../shared/logger.ts";
import type { Batch, LineRecord, LineResult } from "./job-types.ts";
import type { BatchStore } from "./jobs-store.ts";
import { isStorageFull } from "./storage-errors.ts";

/** How long a result may wait to be written with others. */
export const DEFAULT_RESULT_FLUSH_MS = 100;
/** Results waiting that make a write due at once. */
export const DEFAULT_RESULT_FLUSH_LINES = 64;

interface Held {
  b: Batch;
  records: LineRecord[];
  /** How many of `records` (the first ones) the store refused once already: counted then. */
  refused: number;
}

/** What a flush did. */
interface FlushOutcome {
  /** Everything held was written. */
  ok: boolean;
  /** The store refused for want of room (a full disk). */
  storageFull: boolean;
  /** Results the store refused for the first time (each counted once). */
  newlyRefused: number;
  /** Batches whose results are still held after a refusal. */
  held: Batch[];
  /** Batches whose results were all written. */
  written: Batch[];
}

export class PendingResults {
  readonly #store: Pick<BatchStore, "recordResults">;
  readonly #onDue: () => void;
  readonly #flushMs: number;
  readonly #maxLines: number;
  readonly #held = new Map<string, Held>();
  #size = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #due = false;
  #blocked = false;

  /** `onDue`: a write is due (the spell is over, or many wait); the caller flushes on its own turn. */
  constructor(store: Pick<BatchStore, "recordResults">, onDue: () => void, opts: { flushMs?: number; maxLines?: number } = {}) {
    this.#store = store;
    this.#onDue = onDue;
    this.#flushMs = opts.flushMs ?? DEFAULT_RESULT_FLUSH_MS;
    this.#maxLines = opts.maxLines ?? DEFAULT_RESULT_FLUSH_LINES;
  }

  /** Results held now. */
  get size(): number {
    return this.#size;
  }

  /** Whether a write is due. */
  get due(): boolean {
    return this.#due;
  }

  /** The store refused the last write: results are held until one goes through (and the runner sends nothing new meanwhile). */
  get blocked(): boolean {
    return this.#blocked;
  }

  add(b: Batch, lineNo: number, result: LineResult): void {
    let h = this.#held.get(b.id);
    if (h === undefined) this.#held.set(b.id, (h = { b, records: [], refused: 0 }));
    h.records.push({ lineNo, result });
    this.#size++;
    if (this.#size >= this.#maxLines || this.#flushMs <= 0) return this.#markDue();
    this.#timer ??= setTimeout(() => this.#markDue(), this.#flushMs);
  }

  /**
   * Write everything held, a batch at a time; `onRecorded` hears of each
   * result this write recorded (a second answer for a line is not). Stops at
   * the first refusal, keeping what is left for the next flush; the first
   * refusal of a spell and the write that ends it are logged.
   */
  async flush(onRecorded: (result: LineResult) => void): Promise<FlushOutcome> {
    this.#clearTimer();
    this.#due = false;
    const written: Batch[] = [];
    for (const id of [...this.#held.keys()]) {
      // Taken out while it is written: results that arrive meanwhile start a new group.
      const h = this.#held.get(id)!;
      this.#held.delete(id);
      let recorded: boolean[];
      try {
        recorded = await this.#store.recordResults(id, h.records);
      } catch (error) {
        const later = this.#held.get(id);
        if (later !== undefined) h.records.push(...later.records);
        this.#held.set(id, h);
        const all = [...this.#held.values()];
        const newlyRefused = all.reduce((n, x) => n + x.records.length - x.refused, 0);
        for (const x of all) x.refused = x.records.length;
        const storageFull = isStorageFull(error);
        if (!this.#blocked) {
          if (storageFull) logger().warn("the disk is full: batch results are held in memory and no new line is sent until they can be written");
          else
            logger().error(
              { err: error instanceof Error ? error.message : String(error) },
              "batch results could not be written: they are held and tried again",
            );
        }
        this.#blocked = true;
        return { ok: false, storageFull, newlyRefused, held: all.map((x) => x.b), written };
      }
      this.#size -= h.records.length;
      h.records.forEach((r, i) => recorded[i] && onRecorded(r.result));
      written.push(h.b);
    }
    if (this.#blocked) logger().info("batch results are written again: lines are sent again");
    this.#blocked = false;
    return { ok: true, storageFull: false, newlyRefused: 0, held: [], written };
  }

  /** Stop the timer (the runner is stopping; it flushes once more itself). */
  stop(): void {
    this.#clearTimer();
  }

  #markDue(): void {
    this.#clearTimer();
    if (this.#due) return;
    this.#due = true;
    this.#onDue();
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }
}
