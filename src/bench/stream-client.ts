/**
 * A cheap streaming client for benchmarks: sends one OpenAI streaming request
 * and timestamps the first SSE data event and every later one by scanning
 * bytes for event boundaries (no decoding, no JSON), so the client is not what
 * limits the measurement.
 */

export interface StreamTiming {
  ok: boolean;
  status: number;
  /** Send → first event, ms. */
  ttftMs: number;
  /** Gaps between consecutive events, ms. */
  gapsMs: number[];
  events: number;
  totalMs: number;
  error?: string;
}

const LF = 10;
const COLON = 58;

/**
 * Counts the SSE events that carry something (every event but a comment: an
 * event whose first line starts with ':'), a chunk at a time; state carries
 * across chunks, so a boundary or an event split between chunks counts once.
 * Comments do not count: an engine that opens its stream with one (the
 * sim-engine sends `: ` so the headers leave at once, and llmgw drops it) has
 * not produced a token yet, and counting it would time TTFT to the headers.
 */
export class SseEventCounter {
  private prev = LF;
  private atStart = true;
  private comment = false;

  push(chunk: Uint8Array): number {
    let n = 0;
    let prev = this.prev;
    let atStart = this.atStart;
    let comment = this.comment;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i]!;
      if (b === LF && prev === LF) {
        if (!atStart && !comment) n++;
        atStart = true;
        comment = false;
      } else if (atStart && b !== LF) {
        atStart = false;
        comment = b === COLON;
      }
      prev = b;
    }
    this.prev = prev;
    this.atStart = atStart;
    this.comment = comment;
    return n;
  }
}

export async function timedStream(
  url: string,
  body: string,
  opts: { signal?: AbortSignal; headers?: Record<string, string>; onOpen?: (res: Response) => void; onFirstEvent?: () => void } = {},
): Promise<StreamTiming> {
  const start = performance.now();
  const gapsMs: number[] = [];
  let ttftMs = NaN;
  let events = 0;
  let last = start;
  try {
    const res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...opts.headers },
      body,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    if (res.status !== 200 || !res.body) {
      const text = await res.text().catch(() => "");
      const code = /"code":"([A-Z_]+)"/.exec(text)?.[1];
      return {
        ok: false,
        status: res.status,
        ttftMs,
        gapsMs,
        events,
        totalMs: performance.now() - start,
        error: `HTTP ${res.status}${code ? ` ${code}` : ""}`,
      };
    }
    opts.onOpen?.(res);
    const counter = new SseEventCounter();
    for await (const chunk of res.body) {
      const n = counter.push(chunk);
      if (n === 0) continue;
      const now = performance.now();
      if (events === 0) {
        ttftMs = now - start;
        opts.onFirstEvent?.();
      } else gapsMs.push(now - last);
      last = now;
      events += n;
    }
    return { ok: true, status: 200, ttftMs, gapsMs, events, totalMs: performance.now() - start };
  } catch (err) {
    return { ok: false, status: 0, ttftMs, gapsMs, events, totalMs: performance.now() - start, error: err instanceof Error ? err.message : String(err) };
  }
}
