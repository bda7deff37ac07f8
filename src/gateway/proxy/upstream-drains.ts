/**
 * Upstream bodies still open after [DONE]: each is read to its end, so the
 * connection goes back to the pool, and one shared timer (not one per
 * request) cancels those an engine keeps open longer than DRAIN_AFTER_DONE_MS.
 */
import type { OpenStream } from "./upstream.ts";

/** How long an engine may keep a stream open after [DONE] before we cancel it. */
const DRAIN_AFTER_DONE_MS = 2_000;

class UpstreamDrains {
  private readonly open = new Map<OpenStream["reader"], { deadlines: OpenStream["deadlines"]; until: number }>();
  private timer: ReturnType<typeof setInterval> | undefined;

  add(reader: OpenStream["reader"], deadlines: OpenStream["deadlines"]): void {
    this.open.set(reader, { deadlines, until: performance.now() + DRAIN_AFTER_DONE_MS });
    void this.drain(reader);
  }

  private async drain(reader: OpenStream["reader"]): Promise<void> {
    try {
      for (;;) {
        const got = reader.readMany();
        if ((got instanceof Promise ? await got : got).done) break;
        this.arm(); // still open: the sweeper watches it
      }
    } catch {
      // the engine closed abruptly after [DONE]: nothing left to deliver
    } finally {
      this.open.delete(reader);
    }
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      const now = performance.now();
      for (const [reader, d] of this.open) {
        if (now < d.until) continue;
        this.open.delete(reader);
        d.deadlines.abort("engine kept the stream open after [DONE]");
        void reader.cancel().catch(() => {});
      }
      if (this.open.size === 0) {
        clearInterval(this.timer);
        this.timer = undefined;
      }
    }, DRAIN_AFTER_DONE_MS / 4);
    this.timer.unref?.();
  }
}

export const drains = new UpstreamDrains();
