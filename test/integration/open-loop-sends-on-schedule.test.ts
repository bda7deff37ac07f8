/**
 * The replay's open-loop load process sends each request at its scheduled
 * time, measured where it lands: a server in this process stamps every
 * arrival, and the arrivals' offsets from their schedule (less the smallest,
 * as the two processes' clocks start apart) stay within a few ms — also
 * through bursts of simultaneous arrivals, and while earlier answers are
 * still open (the server holds each one 300 ms: an open loop never waits).
 */
import { afterAll, expect, test } from "bun:test";
import { type ScheduledRequest, startOpenLoop } from "../../src/bench/replay/open-loop-driver.ts";
import { CHARS_PER_TOKEN } from "../../src/sim/tokens.ts";

const HOLD_MS = 300;
const arrivals = new Map<number, number>();
let open = 0;
let peakOpen = 0;
const server = Bun.serve({
  port: 0,
  async fetch(req) {
    const at = performance.timeOrigin + performance.now();
    // A request's prompt length names it (request i has i + 1 tokens).
    const id = ((await req.json()) as { prompt: string }).prompt.length / CHARS_PER_TOKEN - 1;
    arrivals.set(id, at);
    peakOpen = Math.max(peakOpen, ++open);
    await Bun.sleep(HOLD_MS);
    open--;
    const sse = 'data: {"choices":[{"text":" ka"}]}\n\ndata: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1}}\n\ndata: [DONE]\n\n';
    return new Response(sse, { headers: { "content-type": "text/event-stream" } });
  },
});
afterAll(() => server.stop(true));

test("300 requests over ~3 s, Poisson gaps and bursts: each lands within a few ms of its schedule", async () => {
  let seed = 7;
  const random = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const requests: ScheduledRequest[] = [];
  let t = 0;
  for (let i = 0; i < 300; i++) {
    t += i % 25 === 0 ? 0 : -Math.log(1 - random()) * 10; // 100 a second, and every 25th arrives with the one before
    requests.push({ atMs: t, segments: [{ key: `request-${i}`, tokens: i + 1 }], maxTokens: 1 });
  }
  const result = await startOpenLoop({ url: `http://127.0.0.1:${server.port}/v1/completions`, model: "m", requests, drainMs: 10_000 }).done;

  expect(result.records.filter((r) => r.error !== undefined)).toEqual([]);
  expect(arrivals.size).toBe(300);
  const offsets = requests.map((r, i) => arrivals.get(i)! - r.atMs);
  const base = Math.min(...offsets);
  const late = offsets.map((o) => o - base).sort((a, b) => a - b);
  const at = (q: number) => late[Math.floor(q * (late.length - 1))]!;
  // Within a few ms; the tail is left to a shared machine's stalls (measured on 2 cores at a load
  // average of 11: p50 0.24–0.63, p75 under 1, p90 0.7–9.3, p99 5–23 ms; the higher tails in the
  // full suite, where other tests' processes are still winding down).
  const round = (x: number) => Math.round(x * 100) / 100;
  const figures = { p50: round(at(0.5)), p75: round(at(0.75)), p90: round(at(0.9)), p99: round(at(0.99)) };
  expect({ figures, p50: figures.p50 < 2, p75: figures.p75 < 5 }).toEqual({ figures, p50: true, p75: true });
  // An open loop that keeps pace does not fall behind: the last 100 sends are no later than the first 100.
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const lateOf = (from: number, to: number) => median(offsets.slice(from, to).map((o) => o - base));
  expect(lateOf(200, 300)).toBeLessThan(lateOf(0, 100) + 2);
  // Never waited for answers: ~30 requests arrive in each 300 ms an answer is held.
  expect(peakOpen).toBeGreaterThan(15);
  // The load process's own account of its lateness agrees.
  const own = result.records.map((r) => r.lateMs).sort((a, b) => a - b);
  expect(own[Math.floor(0.5 * (own.length - 1))]!).toBeLessThan(2);
}, 60_000);
