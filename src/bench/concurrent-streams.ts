/**
 * N concurrent streaming requests from a separate process. A process started
 * by `bun test` keeps Bun's default of 256 outbound requests in flight
 * whatever BUN_CONFIG_MAX_HTTP_REQUESTS says (measured with Bun 1.4.5: peak
 * 256 in a test, 600 in a script), so tests that need more concurrency than
 * that run their load here, in a child started with the llmgw environment.
 *
 * As a module: concurrentStreams(opts) spawns this file and returns the
 * child's summary. As a script: reads the options from the JSON file named by
 * argv[2] (ten thousand request bodies do not fit in an argument list).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../shared/process-env.ts";
import { timedStream } from "./stream-client.ts";

export interface ConcurrentStreamsOptions {
  url: string;
  /** Request bodies: one per stream (their count is the concurrency). */
  bodies: string[];
  headers?: Record<string, string>;
  /** Leave each stream after this many chunks (a client disconnect); undefined = read to the end. */
  abortAfterChunks?: number;
  /** Leave each request after this many ms whatever happened (e.g. during the prefill). */
  abortAfterMs?: number;
  /** Open the streams evenly over this many ms instead of all at once (as real clients arrive). */
  rampMs?: number;
}

export interface ConcurrentStreamsSummary {
  ok: number;
  errors: number;
  /** Event counts of the streams that completed, by count. */
  eventCounts: Record<string, number>;
  /** Requests the client left on purpose. */
  aborted: number;
  firstErrors: string[];
  /** Most streams open at once (response headers in, body not finished), as the client saw them. */
  peakOpen: number;
}

async function run(o: ConcurrentStreamsOptions): Promise<ConcurrentStreamsSummary> {
  const summary: ConcurrentStreamsSummary = { ok: 0, errors: 0, eventCounts: {}, aborted: 0, firstErrors: [], peakOpen: 0 };
  let open = 0;
  const ramp = o.rampMs ?? 0;
  await Promise.all(
    o.bodies.map(async (body, i) => {
      if (ramp > 0) await Bun.sleep((ramp * i) / o.bodies.length);
      await one(body);
    }),
  );
  return summary;

  async function one(body: string): Promise<void> {
    {
      if (o.abortAfterChunks === undefined && o.abortAfterMs === undefined) {
        let opened = false;
        const r = await timedStream(o.url, body, {
          headers: o.headers ?? {},
          onOpen() {
            opened = true;
            summary.peakOpen = Math.max(summary.peakOpen, ++open);
          },
        });
        if (opened) open--;
        if (r.ok) {
          summary.ok++;
          summary.eventCounts[r.events] = (summary.eventCounts[r.events] ?? 0) + 1;
        } else {
          summary.errors++;
          if (summary.firstErrors.length < 3) summary.firstErrors.push(r.error ?? `HTTP ${r.status}`);
        }
        return;
      }
      const ac = new AbortController();
      const timer = o.abortAfterMs === undefined ? undefined : setTimeout(() => ac.abort(), o.abortAfterMs);
      try {
        const res = await fetch(o.url, { method: "POST", headers: { "content-type": "application/json", ...o.headers }, body, signal: ac.signal });
        const reader = res.body!.getReader();
        for (let k = 0; k < (o.abortAfterChunks ?? Infinity); k++) if ((await reader.read()).done) break;
        ac.abort();
        await reader.cancel().catch(() => {});
      } catch {
        // aborted while waiting: what we wanted
      } finally {
        clearTimeout(timer);
        summary.aborted++;
      }
    }
  }
}

export async function concurrentStreams(o: ConcurrentStreamsOptions): Promise<ConcurrentStreamsSummary> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-streams-"));
  const file = join(dir, "options.json");
  writeFileSync(file, JSON.stringify(o));
  try {
    const proc = Bun.spawn([process.execPath, import.meta.path, file], {
      env: childEnv({ LLMGW_PARENT_PID: String(process.pid) }),
      stdout: "pipe",
      stderr: "pipe",
    });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`load client exited ${code}: ${err.slice(-2000)}`);
    return JSON.parse(out) as ConcurrentStreamsSummary;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.main) {
  const o = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as ConcurrentStreamsOptions;
  console.log(JSON.stringify(await run(o)));
}
