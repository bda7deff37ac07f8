/** Bytes of received KV-event batches a subscriber may hold before it drops them: its own bound, and the gateway's, shared by every subscriber. */
import type { KvBatchDropBound } from "../../shared/kv-event-stats.ts";

export class KvByteBudget {
  private usedBytes = 0;

  /** `shared`: the gateway's budget, which every endpoint's draws from too. */
  constructor(
    readonly limitBytes: number,
    private readonly shared?: KvByteBudget,
  ) {}

  get used(): number {
    return this.usedBytes;
  }

  /** Take `n` bytes; undefined when taken, otherwise the bound that refused them (nothing taken). */
  take(n: number): Exclude<KvBatchDropBound, "batches"> | undefined {
    if (this.usedBytes + n > this.limitBytes) return "endpoint-bytes";
    if (this.shared !== undefined && this.shared.usedBytes + n > this.shared.limitBytes) return "gateway-bytes";
    this.usedBytes += n;
    if (this.shared !== undefined) this.shared.usedBytes += n;
    return undefined;
  }

  give(n: number): void {
    this.usedBytes -= n;
    if (this.shared !== undefined) this.shared.usedBytes -= n;
  }
}
