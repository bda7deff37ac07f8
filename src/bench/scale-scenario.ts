/**
 * `llmgw bench scale`: ten thousand open streams through one gateway. Slow
 * streams (one token a second, 30 tokens) from their own load process, to
 * sim-engines sized to hold them all at once; the gateway's resident memory
 * at rest, at the peak and after, and its memory per open stream. Each open
 * stream holds two sockets in the gateway (client and engine), so the
 * streams are capped at what the open-files hard limit allows, and the
 * report says when that cap applied.
 */
import { readFileSync } from "node:fs";
import { boolFlag, numberFlag } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { FD_RESERVE, FDS_PER_STREAM, readOpenFilesLimit } from "../shared/open-files-limit.ts";
import { concurrentStreams } from "./concurrent-streams.ts";
import { formatTable } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-scale";
const MIB = 1024 * 1024;

const USAGE = `usage: llmgw bench scale [--streams N] [--tokens N] [--itl-ms MS] [--engines N] [--ramp-s S] [--json]

Opens N concurrent streaming requests at once (from a separate load process)
through one gateway to sim-engines sized to hold them, and reports the
gateway's resident memory at rest, at the peak and after the streams ended,
memory per open stream, completed streams and errors. Streams are capped at
what the open-files hard limit allows (two sockets per stream in the gateway).

flags:
  --streams N   concurrent streams (default 10000)
  --tokens N    tokens per stream (default 30)
  --itl-ms MS   sim-engine inter-token latency (default 1000: one token a second)
  --engines N   sim-engines (default 4)
  --ramp-s S    open the streams evenly over S seconds, as clients arrive (default 5;
                every stream still overlaps every other: each lasts tokens × itl)
  --json        one JSON object instead of the table`;

/** Resident set of a process, bytes (Linux), or NaN. */
function rssOf(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** The bench's gateway needs its admin token for the full collection before each RSS reading. */
const ADMIN_TOKEN = "scale-bench-admin-token";

/** A full collection in the gateway (admin diagnostics), then its RSS once things settle. */
async function settledRss(gw: LlmgwChild): Promise<number> {
  const res = await fetch(`${gw.urls.admin}/admin/v1/diagnostics/gc`, { method: "POST", headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (!res.ok) throw new Error(`admin gc: HTTP ${res.status}: ${await res.text()}`);
  await Bun.sleep(500);
  return rssOf(gw.proc.pid);
}

export interface ScaleReport {
  scenario: "scale";
  requested_streams: number;
  streams: number;
  /** Why fewer streams ran than requested (the open-files hard limit), if so. */
  capped_by: string | null;
  completed: number;
  errors: number;
  peak_open: number;
  rss_rest_mib: number;
  rss_peak_mib: number;
  rss_after_mib: number;
  kib_per_open_stream: number;
  after_vs_rest: number;
  seconds: number;
  first_errors: string[];
}

export async function runScaleBench(opts: {
  streams: number;
  tokens: number;
  itlMs: number;
  engines: number;
  rampS: number;
  log: (s: string) => void;
}): Promise<ScaleReport> {
  const limit = readOpenFilesLimit();
  const fits = limit && Number.isFinite(limit.hard) ? Math.floor((limit.hard - FD_RESERVE) / FDS_PER_STREAM) : Number.POSITIVE_INFINITY;
  const streams = Math.min(opts.streams, fits);
  const capped =
    streams < opts.streams ? `the open-files hard limit ${limit?.hard} holds ${streams} streams (${FDS_PER_STREAM} sockets each + ${FD_RESERVE})` : null;
  if (capped) opts.log(`note: ${capped}; raise it (LimitNOFILE=, or ulimit -Hn as root) for ${opts.streams}`);
  const perEngine = Math.ceil(streams / opts.engines) + 64;
  const children: LlmgwChild[] = [];
  try {
    opts.log(`starting ${opts.engines} sim-engines (${perEngine} slots each) and a gateway…`);
    const sims = await Promise.all(
      Array.from({ length: opts.engines }, () =>
        spawnLlmgw([
          "sim-engine",
          "--port",
          "0",
          "--model",
          MODEL,
          "--max-num-seqs",
          String(perEngine),
          "--num-gpu-blocks",
          String(perEngine * 4 + 64),
          "--itl-ms",
          String(opts.itlMs),
          "--prefill-overhead-ms",
          "1",
          "--prefill-ms-per-token",
          "0",
          "--jitter",
          "0",
          "--batch-slowdown",
          "0",
        ]),
      ),
    );
    children.push(...sims);
    const gw = await spawnLlmgw(
      [
        "serve",
        "--config",
        writeGatewayConfig({
          admin: { token: ADMIN_TOKEN },
          max_open_streams: streams,
          health: { poll_interval_ms: 500 },
          admission: { initial_capacity: perEngine },
          endpoints: sims.map((s, i) => ({ id: `sim-${i + 1}`, url: s.urls.api, models: [MODEL] })),
        }),
      ],
      { waitFor: 2 },
    );
    children.push(gw);
    for (let i = 0; i < 100; i++) {
      const r = (await (await fetch(`${gw.urls.admin}/readyz`)).json()) as { endpoints_ready: number };
      if (r.endpoints_ready === opts.engines) break;
      await Bun.sleep(100);
    }
    const body = (tokens: number) => JSON.stringify({ model: MODEL, stream: true, max_tokens: tokens, messages: [{ role: "user", content: "hi" }] });
    // Warm-up: pools, JIT and the first of everything, with short answers.
    await concurrentStreams({ url: `${gw.urls.api}/v1/chat/completions`, bodies: Array.from({ length: 200 }, () => body(1)) });
    const rest = await settledRss(gw);
    opts.log(`gateway at rest: ${(rest / MIB).toFixed(1)} MiB; opening ${streams} streams…`);
    let peak = rest;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        peak = Math.max(peak, rssOf(gw.proc.pid) || 0);
        await Bun.sleep(250);
      }
    })();
    const t0 = performance.now();
    const r = await concurrentStreams({
      url: `${gw.urls.api}/v1/chat/completions`,
      bodies: Array.from({ length: streams }, () => body(opts.tokens)),
      rampMs: opts.rampS * 1000,
    });
    const seconds = (performance.now() - t0) / 1000;
    sampling = false;
    await sampler;
    await Bun.sleep(2_000);
    const after = await settledRss(gw);
    return {
      scenario: "scale",
      requested_streams: opts.streams,
      streams,
      capped_by: capped,
      completed: r.ok,
      errors: r.errors,
      peak_open: r.peakOpen,
      rss_rest_mib: rest / MIB,
      rss_peak_mib: peak / MIB,
      rss_after_mib: after / MIB,
      kib_per_open_stream: (peak - rest) / 1024 / Math.max(1, r.peakOpen),
      after_vs_rest: after / rest,
      seconds,
      first_errors: r.firstErrors,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

export const scaleScenario: BenchScenario = {
  name: "scale",
  summary: "10,000 open streams through one gateway: memory per stream",
  usage: USAGE,
  options: { streams: { type: "string" }, tokens: { type: "string" }, "itl-ms": { type: "string" }, engines: { type: "string" }, "ramp-s": { type: "string" } },
  async run(args) {
    const json = boolFlag(args, "json");
    const r = await runScaleBench({
      streams: numberFlag(args, "streams", 10_000, { min: 1, max: 1_000_000, integer: true }),
      tokens: numberFlag(args, "tokens", 30, { min: 1, max: 10_000, integer: true }),
      itlMs: numberFlag(args, "itl-ms", 1000, { min: 0, max: 60_000 }),
      engines: numberFlag(args, "engines", 4, { min: 1, max: 32, integer: true }),
      rampS: numberFlag(args, "ramp-s", 5, { min: 0, max: 600 }),
      log: json ? () => {} : (s) => console.error(s),
    });
    if (json) {
      console.log(JSON.stringify(r));
      return 0;
    }
    console.log(
      formatTable({
        title: `llmgw bench scale — ${r.streams} concurrent streams${r.capped_by ? ` (of ${r.requested_streams} asked: ${r.capped_by})` : ""}`,
        columns: [
          "streams",
          "completed",
          "errors",
          "peak open",
          "RSS rest MiB",
          "RSS peak MiB",
          "RSS after MiB",
          "KiB / open stream",
          "after / rest",
          "seconds",
        ],
        rows: [
          [r.streams, r.completed, r.errors, r.peak_open, r.rss_rest_mib, r.rss_peak_mib, r.rss_after_mib, r.kib_per_open_stream, r.after_vs_rest, r.seconds],
        ],
      }),
    );
    if (r.first_errors.length > 0) console.log(`first errors: ${r.first_errors.join("; ")}`);
    return 0;
  },
};
