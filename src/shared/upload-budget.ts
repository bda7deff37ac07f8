/** The bytes request bodies hold in memory at once, gateway-wide (batch.upload_memory_bytes): uploads on their way to disk, transcription forms held until answered. */
import { LlmgwError } from "./errors.ts";

export class UploadBudget {
  #held = 0;
  constructor(readonly maxBytes: number) {}

  get held(): number {
    return this.#held;
  }

  take(n: number): void {
    if (this.#held + n > this.maxBytes) {
      throw new LlmgwError(
        "UPLOAD_BUDGET_EXHAUSTED",
        `uploads hold ${this.#held} bytes in memory, at the gateway's limit of ${this.maxBytes} (batch.upload_memory_bytes); retry shortly`,
        { retryAfterS: 1 },
      );
    }
    this.#held += n;
  }

  give(n: number): void {
    this.#held = Math.max(0, this.#held - n);
  }
}

/** One request's share of the budget: grown as its body arrives, given back once (later growth is ignored). */
export class BudgetShare {
  #held = 0;
  #released = false;
  constructor(private readonly budget: UploadBudget) {}

  /** Hold `total` bytes in all; past the budget throws UPLOAD_BUDGET_EXHAUSTED (what is held stays held until release). */
  growTo(total: number): void {
    if (this.#released || total <= this.#held) return;
    this.budget.take(total - this.#held);
    this.#held = total;
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    this.budget.give(this.#held);
    this.#held = 0;
  }
}
