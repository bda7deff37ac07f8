/**
 * `llmgw bench batch`: batch work yields to interactive traffic under GPU
 * saturation. Sim-engines with simulated GPUs behind a gateway with
 * gpu_health; a batch job (Files and Batches API) runs while interactive
 * probes measure TTFT in four phases: idle (no batch), before (the batch
 * runs), during (the GPUs are pinned at 100 % through POST /sim/config, so
 * the pool is in sustained saturation: batch lines wait and batch-band
 * requests get 429 GPU_SATURATED) and after (unpinned: the batch resumes).
 * Reports TTFT per phase, ratio = during p99 / idle p99 (target ≤ 1.25), and
 * batch lines/s per phase. "during" is measured once the lines admitted
 * before saturation was seen have finished: it is the shed steady state.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEFAULT_RESULT_FLUSH_MS } from "../jobs/pending-results.ts";
import { boolFlag, numberFlag, UsageError } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { type EmbeddingsBatchReport, runEmbeddingsBatchBench } from "./batch-embeddings-scenario.ts";
import { formatTable, median, quantile } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";
import { timedStream } from "./stream-client.ts";

const MODEL = "bench-model";
export const INTERACTIVE_KEY = "interactive-key-for-bench";
export const BATCH_KEY = "batch-key-for-bench";

export interface BatchBenchOptions {
  engines: number;
  /** Length of each measured phase, per round. */
  phaseMs: number;
  /** Rounds of the four phases (each with a batch job of its own). */
  rounds: number;
  batchLines: number;
  /** Lines of the batch in flight at once. */
  concurrency: number;
  /** Batch-band HTTP clients sending during saturation (each honours Retry-After). */
  shedClients: number;
  log?: (line: string) => void;
}

export interface PhaseReport {
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  probes: number;
  errors: number;
  batch_lines_per_s: number;
}

export interface BatchBenchReport {
  scenario: "batch";
  engines: number;
  rounds: number;
  idle: PhaseReport;
  before: PhaseReport;
  during: PhaseReport & { shed_429s: number; shed_counter: number };
  after: PhaseReport;
  /** Interactive TTFT p99 while batch is shed / idle (target ≤ 1.25), and while the batch runs unshed / idle. */
  ratio_during: number;
  ratio_before: number;
  /** Pinning the GPUs → the pool published saturated; unpinning → cleared (medians over rounds). */
  saturation_detected_ms: number;
  saturation_cleared_ms: number;
  batch_completed: number;
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

async function batchCompleted(api: string, id: string): Promise<number> {
  const b = (await (await fetch(`${api}/v1/batches/${id}`, { headers: auth(BATCH_KEY) })).json()) as { request_counts: { completed: number; failed: number } };
  return b.request_counts.completed + b.request_counts.failed;
}

async function metric(admin: string, name: string): Promise<number> {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(await (await fetch(`${admin}/metrics`)).text());
  return m ? Number(m[1]) : NaN;
}

async function endpointsInflight(admin: string): Promise<number> {
  const r = (await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { inflight: number }[] };
  return r.endpoints.reduce((n, e) => n + e.inflight, 0);
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const start = performance.now();
  while (performance.now() - start < timeoutMs) {
    if (await cond()) return performance.now() - start;
    await Bun.sleep(25);
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}

/** What one phase measured, accumulated over rounds. */
interface PhaseSamples {
  ttfts: number[];
  errors: number;
  lines: number;
  seconds: number;
}

const newSamples = (): PhaseSamples => ({ ttfts: [], errors: 0, lines: 0, seconds: 0 });

function summarize(p: PhaseSamples): PhaseReport {
  return {
    ttft_p50_ms: quantile(p.ttfts, 0.5),
    ttft_p99_ms: quantile(p.ttfts, 0.99),
    probes: p.ttfts.length,
    errors: p.errors,
    batch_lines_per_s: p.lines / p.seconds,
  };
}

/** Interactive streaming probes from three sequential clients for `ms`, and the batch's lines over the same window, into `into`. */
async function measurePhase(api: string, ms: number, batchId: string | undefined, tag: string, into: PhaseSamples): Promise<void> {
  const linesBefore = batchId === undefined ? 0 : await batchCompleted(api, batchId);
  const start = performance.now();
  const client = async (c: number) => {
    for (let i = 0; performance.now() - start < ms; i++) {
      const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 4, messages: [{ role: "user", content: `interactive ${tag} ${c}-${i}` }] });
      const r = await timedStream(`${api}/v1/chat/completions`, body, { headers: auth(INTERACTIVE_KEY) });
      if (r.ok && r.events > 0) into.ttfts.push(r.ttftMs);
      else into.errors++;
      await Bun.sleep(20);
    }
  };
  await Promise.all([client(0), client(1), client(2)]);
  into.seconds += (performance.now() - start) / 1000;
  if (batchId !== undefined) into.lines += (await batchCompleted(api, batchId)) - linesBefore;
}

async function createBatch(api: string, lines: number, round: number): Promise<string> {
  let jsonl = "";
  for (let i = 0; i < lines; i++) {
    jsonl += `${JSON.stringify({ custom_id: `line-${i}`, method: "POST", url: "/v1/chat/completions", body: { model: MODEL, max_tokens: 8, messages: [{ role: "user", content: `document ${round}-${i}` }] } })}\n`;
  }
  const form = new FormData();
  form.append("purpose", "batch");
  form.append("file", new File([jsonl], `bench-${round}.jsonl`));
  const file = (await (await fetch(`${api}/v1/files`, { method: "POST", headers: auth(BATCH_KEY), body: form })).json()) as { id: string };
  const created = await fetch(`${api}/v1/batches`, {
    method: "POST",
    headers: { "content-type": "application/json", ...auth(BATCH_KEY) },
    body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
  });
  return ((await created.json()) as { id: string }).id;
}

/** Batch-band requests outside the batch job while the pool is saturated: each answered 429 is counted; clients wait its Retry-After. */
function startShedLoad(api: string, clients: number): { stop(): Promise<{ shed: number; other: number }> } {
  let running = true;
  const counts = { shed: 0, other: 0 };
  const loops = Array.from({ length: clients }, async (_, c) => {
    while (running) {
      const res = await fetch(`${api}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...auth(BATCH_KEY) },
        body: JSON.stringify({ model: MODEL, max_tokens: 4, messages: [{ role: "user", content: `backfill ${c}` }] }),
      });
      const text = await res.text();
      if (res.status === 429 && text.includes("GPU_SATURATED")) counts.shed++;
      else counts.other++;
      await Bun.sleep(res.status === 429 ? Number(res.headers.get("retry-after") ?? 1) * 1000 : 50);
    }
  });
  return {
    async stop() {
      running = false;
      await Promise.all(loops);
      return counts;
    },
  };
}

/** Waits until `read` gives the same count twice `gapMs` apart (or `timeoutMs` passed). */
async function countSettled(read: () => Promise<number>, gapMs: number, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let last = await read();
  while (performance.now() < deadline) {
    await Bun.sleep(gapMs);
    const now = await read();
    if (now === last) return;
    last = now;
  }
}

export async function runBatchBench(opts: BatchBenchOptions): Promise<BatchBenchReport> {
  const log = opts.log ?? (() => {});
  const children: LlmgwChild[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "llmgw-bench-batch-"));
  try {
    for (let i = 0; i < opts.engines; i++) {
      const args = [
        "sim-engine",
        "--port",
        "0",
        "--model",
        MODEL,
        "--max-num-seqs",
        "64",
        "--itl-ms",
        "20",
        "--prefill-overhead-ms",
        "100",
        "--gpus",
        "1",
        "--dcgm-port",
        "0",
      ];
      children.push(await spawnLlmgw(args, { waitFor: 2 }));
    }
    const sims = [...children];
    const pin = (pct: number | null) =>
      Promise.all(sims.map((s) => fetch(`${s.urls.api}/sim/config`, { method: "POST", body: JSON.stringify({ gpus: [{ index: 0, utilization_pct: pct }] }) })));
    const config = writeGatewayConfig({
      data_dir: dataDir,
      health: { poll_interval_ms: 100 },
      auth: {
        keys: [
          { key: INTERACTIVE_KEY, tenant: "chat-app", max_band: "interactive" },
          { key: BATCH_KEY, tenant: "evals", max_band: "batch" },
        ],
      },
      endpoints: sims.map((s, i) => ({ id: `sim-${i + 1}`, url: s.urls.api, models: [MODEL], dcgm_url: `${s.urls.dcgm}/metrics` })),
      gpu_health: { poll_interval_ms: 100, sustained_samples: 5, stale_after_ms: 1_000, shed_util_pct: 95 },
      batch: { concurrency_per_batch: opts.concurrency, concurrency_per_tenant: opts.concurrency, retry_backoff_ms: 200 },
    });
    // The launcher waits for the "listening" lines, which are logged at info.
    const gw = await spawnLlmgw(["serve", "--config", config, "--log-level", "info"], { waitFor: 2 });
    children.push(gw);
    const api = gw.urls.api!;
    const admin = gw.urls.admin!;
    await waitFor(async () => (await (await fetch(`${admin}/readyz`)).status) === 200, 15_000);

    // Warm the connections and the engines' first steps: the idle baseline must not carry start-up outliers.
    await measurePhase(api, 500, undefined, "warm-up", newSamples());
    const [idle, before, during, after] = [newSamples(), newSamples(), newSamples(), newSamples()];
    const detected: number[] = [];
    const cleared: number[] = [];
    let shed429s = 0;
    let shedCounter = 0;
    let completed = 0;
    // Rounds of the four phases, each with its own batch job: a noisy spell on a shared machine lands on every phase.
    for (let round = 0; round < opts.rounds; round++) {
      log(`round ${round + 1}/${opts.rounds}: idle`);
      await measurePhase(api, opts.phaseMs, undefined, `idle-${round}`, idle);
      const batchId = await createBatch(api, opts.batchLines, round);
      await waitFor(async () => (await batchCompleted(api, batchId)) > opts.concurrency, 15_000);
      log(`round ${round + 1}/${opts.rounds}: the batch runs`);
      await measurePhase(api, opts.phaseMs, batchId, `before-${round}`, before);

      log(`round ${round + 1}/${opts.rounds}: GPUs saturated`);
      await pin(100);
      detected.push(await waitFor(async () => (await metric(admin, "llmgw_pool_gpu_saturated")) === 1, 10_000));
      // Lines admitted before saturation was seen finish their few tokens; measure once shedding is all that happens.
      await waitFor(async () => (await endpointsInflight(admin)) === 0, 10_000);
      // Their results are written in groups, up to DEFAULT_RESULT_FLUSH_MS later: count from when the last is recorded.
      await countSettled(() => batchCompleted(api, batchId), 1.5 * DEFAULT_RESULT_FLUSH_MS, 5_000);
      const shedAtStart = await metric(admin, "llmgw_gpu_shed_total");
      const shedLoad = startShedLoad(api, opts.shedClients);
      await measurePhase(api, opts.phaseMs, batchId, `during-${round}`, during);
      shed429s += (await shedLoad.stop()).shed;
      shedCounter += (await metric(admin, "llmgw_gpu_shed_total")) - shedAtStart;

      log(`round ${round + 1}/${opts.rounds}: saturation over`);
      await pin(null);
      cleared.push(await waitFor(async () => (await metric(admin, "llmgw_pool_gpu_saturated")) === 0, 10_000));
      await measurePhase(api, opts.phaseMs, batchId, `after-${round}`, after);
      completed += await batchCompleted(api, batchId);
      await fetch(`${api}/v1/batches/${batchId}/cancel`, { method: "POST", headers: auth(BATCH_KEY) });
      await waitFor(async () => (await endpointsInflight(admin)) === 0, 10_000);
    }
    const [i, b, d, a] = [summarize(idle), summarize(before), summarize(during), summarize(after)];
    return {
      scenario: "batch",
      engines: opts.engines,
      rounds: opts.rounds,
      idle: i,
      before: b,
      during: { ...d, shed_429s: shed429s, shed_counter: shedCounter },
      after: a,
      ratio_during: d.ttft_p99_ms / i.ttft_p99_ms,
      ratio_before: b.ttft_p99_ms / i.ttft_p99_ms,
      saturation_detected_ms: median(detected),
      saturation_cleared_ms: median(cleared),
      batch_completed: completed,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  }
}

const USAGE = `usage: llmgw bench batch [--case shed|embeddings] [--engines N] [--phase-ms MS] [--rounds N] [--lines N]
                         [--concurrency N] [--shed-clients N] [--line-bytes N] [--json]

--case shed (the default):

Sim-engines with one simulated GPU each (100 ms prefill, 20 ms a token)
behind a gateway with gpu_health. A batch job runs while three interactive
clients measure TTFT in four phases:
idle (no batch), before (the batch runs), during (the GPUs are pinned at
100 % utilisation: sustained saturation, batch lines wait and batch-band
requests get 429 GPU_SATURATED) and after. Prints TTFT per phase, ratio =
during p99 / idle p99 (target ≤ 1.25), and batch lines/s per phase. The
four phases repeat --rounds times, each round with a new batch job, so a noisy
spell on a shared machine falls on every phase.

--case embeddings: an embeddings batch (--lines, default 10000, of
--line-bytes, default 8192, of input each) through the Files and Batches
API while three interactive clients stream; with no batch (idle: a window
of --phase-ms before it and one after it, pooled) and while it runs (until
it ends) reports TTFT, ratio = batch p99 / idle p99 (target ≤ 1.25), the
same without the probes the gateway's waits for a CPU may have delayed, the
gateway's event-loop stalls over 50 ms by cause — its own (target: none
added) or waits for a CPU the host did not give it — the gateway's CPU, and
the batch's lines/s.

flags:
  --case C           shed (default) or embeddings
  --engines N        sim-engines (default 2)
  --phase-ms MS      length of each phase in each round (default 3000; embeddings: of each idle window, default 5000)
  --rounds N         rounds of the four phases (default 2)
  --lines N          lines of each round's batch job (default 4000: more than a round finishes)
  --concurrency N    batch lines in flight (batch.concurrency_per_batch, default 32)
  --shed-clients N   batch-band HTTP clients during saturation, honouring Retry-After (default 8)
  --line-bytes N     embeddings case: input bytes of each line (default 8192)
  --json             one JSON object instead of the table`;

async function runEmbeddingsCase(args: Parameters<BenchScenario["run"]>[0], json: boolean): Promise<number> {
  const r = await runEmbeddingsBatchBench({
    engines: numberFlag(args, "engines", 2, { min: 1, max: 16, integer: true }),
    lines: numberFlag(args, "lines", 10_000, { min: 100, max: 50_000, integer: true }),
    lineBytes: numberFlag(args, "line-bytes", 8_192, { min: 16, max: 1_000_000, integer: true }),
    concurrency: numberFlag(args, "concurrency", 32, { min: 1, max: 1_000, integer: true }),
    phaseMs: numberFlag(args, "phase-ms", 5_000, { min: 500, max: 600_000, integer: true }),
    maxBatchMs: 600_000,
    log: json ? undefined : (l) => console.error(l),
  });
  if (json) {
    console.log(JSON.stringify(r));
    return 0;
  }
  const row = (name: string, w: EmbeddingsBatchReport["idle"], ratio: number, ratioNoCpuWait: number) => [
    name,
    w.ttft_p50_ms,
    w.ttft_p99_ms,
    ratio,
    w.ttft_p99_no_cpu_wait_ms,
    ratioNoCpuWait,
    w.probes,
    w.errors,
    w.gateway_stalls,
    w.stalls - w.gateway_stalls,
    w.stalled_ms,
    w.cpu_main_ms_per_s ?? NaN,
    w.cpu_total_ms_per_s ?? NaN,
    w.seconds,
  ];
  console.log(
    formatTable({
      title: `llmgw bench batch --case embeddings — ${r.lines} lines of ${r.line_bytes} bytes; interactive TTFT (ms; ratio = p99 / idle p99; "excl." without the probes CPU waits delayed), event-loop stalls over 50 ms (the gateway's own, and waits for a CPU), gateway CPU (ms/s)`,
      columns: [
        "window",
        "ttft p50",
        "ttft p99",
        "ratio",
        "p99 excl.",
        "ratio excl.",
        "probes",
        "errors",
        "own stalls",
        "cpu-wait stalls",
        "stalled ms",
        "cpu main",
        "cpu all",
        "seconds",
      ],
      rows: [row("idle (before + after)", r.idle, 1, 1), row("embeddings batch runs", r.batch, r.ratio, r.ratio_no_cpu_wait)],
    }),
  );
  const perLine =
    r.batch.cpu_main_ms_per_line === undefined
      ? ""
      : `; gateway CPU per line ${r.batch.cpu_main_ms_per_line.toFixed(2)} ms on the main thread, ${r.batch.cpu_total_ms_per_line!.toFixed(2)} ms in all`;
  console.log(
    `\nbatch ${r.batch.status}: ${r.batch.completed} completed, ${r.batch.failed} failed, ${r.batch.lines_per_s.toFixed(0)} lines/s; upload and create took ${r.batch.upload_s.toFixed(1)} s (${r.batch.upload_gateway_stalls} stalls of the gateway's own)${perLine}`,
  );
  return 0;
}

export const batchScenario: BenchScenario = {
  name: "batch",
  summary: "interactive TTFT while batch work is shed under GPU saturation, and batch lines/s before, during, after",
  usage: USAGE,
  options: {
    case: { type: "string" },
    "line-bytes": { type: "string" },
    engines: { type: "string" },
    "phase-ms": { type: "string" },
    rounds: { type: "string" },
    lines: { type: "string" },
    concurrency: { type: "string" },
    "shed-clients": { type: "string" },
  },
  async run(args) {
    const json = boolFlag(args, "json");
    const which = args.values.case ?? "shed";
    if (which === "embeddings") return runEmbeddingsCase(args, json);
    if (which !== "shed") throw new UsageError(`--case must be shed or embeddings, not '${String(which)}'`);
    const r = await runBatchBench({
      engines: numberFlag(args, "engines", 2, { min: 1, max: 16, integer: true }),
      phaseMs: numberFlag(args, "phase-ms", 3_000, { min: 500, max: 600_000, integer: true }),
      rounds: numberFlag(args, "rounds", 2, { min: 1, max: 20, integer: true }),
      batchLines: numberFlag(args, "lines", 4_000, { min: 100, max: 50_000, integer: true }),
      concurrency: numberFlag(args, "concurrency", 32, { min: 1, max: 1_000, integer: true }),
      shedClients: numberFlag(args, "shed-clients", 8, { min: 0, max: 1_000, integer: true }),
      log: json ? undefined : (l) => console.error(l),
    });
    if (json) {
      console.log(JSON.stringify(r));
      return 0;
    }
    const row = (name: string, p: PhaseReport, ratio: number) => [name, p.ttft_p50_ms, p.ttft_p99_ms, ratio, p.probes, p.errors, p.batch_lines_per_s];
    console.log(
      formatTable({
        title: `llmgw bench batch — ${r.engines} sim-engines, ${r.rounds} rounds, interactive TTFT (ms; ratio = p99 / idle p99) and batch lines/s`,
        columns: ["phase", "ttft p50", "ttft p99", "ratio", "probes", "errors", "batch lines/s"],
        rows: [
          row("idle", r.idle, 1),
          row("before (batch runs)", r.before, r.ratio_before),
          row("during (saturated, shed)", r.during, r.ratio_during),
          row("after", r.after, r.after.ttft_p99_ms / r.idle.ttft_p99_ms),
        ],
      }),
    );
    console.log(
      `\nsaturation detected ${r.saturation_detected_ms.toFixed(0)} ms after the GPUs were pinned, cleared ${r.saturation_cleared_ms.toFixed(0)} ms after unpinning (medians)`,
    );
    console.log(
      `during saturation: ${r.during.shed_429s} batch-band requests answered 429 GPU_SATURATED, llmgw_gpu_shed_total +${r.during.shed_counter}; batch lines completed: ${r.batch_completed}`,
    );
    return 0;
  },
};
