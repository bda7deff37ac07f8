/** One bounded HTTP GET for the health poller: headers and body under a single deadline, never throws. */

/** The slice of `fetch` the pollers use (tests inject their own). */
export type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

export type ProbeResult =
  | { ok: true; status: number; body: string }
  /** `status` is set when the server answered with a non-2xx status. */
  | { ok: false; status: number | undefined; error: string; timedOut: boolean };

/**
 * GET `url` with a deadline of `timeoutMs` over dial, headers and body. Bun's
 * fetch has no working connect timeout and its `timeout` option fires late
 * (measured with Bun 1.4), so the deadline is our own AbortController, combined with
 * `outer` (the poller's stop signal) so stop() aborts in-flight probes.
 */
export async function probe(
  fetchFn: FetchFn,
  url: string,
  timeoutMs: number,
  outer: AbortSignal,
  label: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<ProbeResult> {
  // One controller, the outer signal forwarded with a listener removed at the
  // end: AbortSignal.any() leaves a composite signal behind per call.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), timeoutMs);
  const onOuter = () => deadline.abort();
  if (outer.aborted) deadline.abort();
  else outer.addEventListener("abort", onOuter, { once: true });
  const signal = deadline.signal;
  try {
    const res = await fetchFn(url, { method: "GET", signal, headers: { accept: "text/plain, application/json", ...headers } });
    if (res.status < 200 || res.status > 299) {
      // Drop the body so the connection is released; we only need the status.
      await res.body?.cancel().catch(() => undefined);
      return { ok: false, status: res.status, error: `${label}: HTTP ${res.status}`, timedOut: false };
    }
    const body = await res.text();
    return { ok: true, status: res.status, body };
  } catch (err) {
    if (deadline.signal.aborted && !outer.aborted) {
      return { ok: false, status: undefined, error: `${label}: timed out after ${timeoutMs} ms`, timedOut: true };
    }
    if (outer.aborted) return { ok: false, status: undefined, error: `${label}: aborted (poller stopped)`, timedOut: false };
    return { ok: false, status: undefined, error: `${label}: ${describeError(err)}`, timedOut: false };
  } finally {
    clearTimeout(timer);
    outer.removeEventListener("abort", onOuter);
  }
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as Error & { code?: unknown }).code;
    // Bun already starts some messages with the code ("ECONNREFUSED: Unable to connect…").
    return typeof code === "string" && code !== "" && !err.message.startsWith(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/** `path` on the origin of `base` (engines serve /metrics, /health, /v1/models at the root even when configured as …/v1). */
export function originPath(base: string, path: string): string {
  return new URL(path, base).toString();
}
