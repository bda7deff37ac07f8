/**
 * A streaming client that keeps what a user would see: every event's
 * payload and when it arrived (performance.now(), comparable with the
 * bench's own clock), the status, and the endpoint the gateway named — for
 * checking answers whole and timing the gaps in them (`llmgw bench chaos`).
 */

export interface RecordedStream {
  sentAt: number;
  endedAt: number;
  status: number;
  /** x-llmgw-endpoint: where the stream started. */
  endpoint: string | undefined;
  /** SSE data payloads in order ("[DONE]" included). */
  payloads: string[];
  /** Arrival time of each payload. */
  arrivals: number[];
  /** Transport failure or an error status, when there was one. */
  failure?: string;
}

export async function recordStream(url: string, body: string): Promise<RecordedStream> {
  const r: RecordedStream = { sentAt: performance.now(), endedAt: 0, status: 0, endpoint: undefined, payloads: [], arrivals: [] };
  try {
    const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
    r.status = res.status;
    r.endpoint = res.headers.get("x-llmgw-endpoint") ?? undefined;
    if (res.status !== 200 || !res.body) {
      r.failure = `HTTP ${res.status} ${(await res.text()).slice(0, 200)}`;
      return r;
    }
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      const now = performance.now();
      buf += decoder.decode(chunk, { stream: true });
      let end: number;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, end).trim();
        buf = buf.slice(end + 2);
        if (!event.startsWith("data:")) continue;
        r.payloads.push(event.slice(5).trim());
        r.arrivals.push(now);
      }
    }
  } catch (err) {
    r.failure = `transport: ${err instanceof Error ? err.message : String(err)}`;
  } finally {
    r.endedAt = performance.now();
  }
  return r;
}

/** The longest wait between consecutive events of a stream, ms (0 with fewer than two). */
export function longestGapMs(r: RecordedStream): number {
  let gap = 0;
  for (let i = 1; i < r.arrivals.length; i++) gap = Math.max(gap, r.arrivals[i]! - r.arrivals[i - 1]!);
  return gap;
}
