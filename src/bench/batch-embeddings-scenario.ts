/**
 * `llmgw bench batch --case embeddings`: a large embeddings batch (10,000
 * lines of ~8 KB each by default) through the Files and Batches API while
 * three interactive clients stream chat completions. Measures interactive
 * TTFT with no batch (idle: a window before the batch and one after it,
 * pooled, so that a host that got busier or quieter meanwhile shows on both
 * sides) and while the batch runs; the gateway's event-loop stalls over
 * 50 ms in each window by cause (llmgw_event_loop_stall_seconds: the
 * gateway's own, or waiting for a CPU the host did not give it); the
 * gateway's CPU (main thread and all threads); and the batch's lines/s.
 * Targets: no stall of the gateway's own added by the batch, TTFT p99
 * during / idle ≤ 1.25.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { cpuDelta, cpuSample } from "./proc-cpu.ts";
import { quantile } from "./report.ts";
import { timedStream } from "./stream-client.ts";

const MODEL = "bench-model";
const INTERACTIVE_KEY = "interactive-key-for-bench";
const BATCH_KEY = "batch-key-for-bench";

interface EmbeddingsBatchOptions {
  engines: number;
  lines: number;
  /** Bytes of input text per line. */
  lineBytes: number;
  concurrency: number;
  /** Length of the idle window (the batch window lasts until the batch ends, or `maxBatchMs`). */
  phaseMs: number;
  maxBatchMs: number;
  log?: (line: string) => void;
}

interface WindowReport {
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  /**
   * TTFT p99 once the probes that the gateway's waits for a CPU may have
   * delayed are set aside: for each such stall, the three slowest probes
   * (one a client: the most a stall can catch in flight).
   */
  ttft_p99_no_cpu_wait_ms: number;
  probes: number;
  errors: number;
  seconds: number;
  /** Stalls over 50 ms, all causes. */
  stalls: number;
  stalled_ms: number;
  /** Of those, the gateway's own (its loop busy or blocked), the rest waited for a CPU. */
  gateway_stalls: number;
  gateway_stalled_ms: number;
  /** The gateway's CPU, ms per second of the window: its main thread (the event loop), and all its threads; absent where /proc cannot tell. */
  cpu_main_ms_per_s?: number;
  cpu_total_ms_per_s?: number;
}

export interface EmbeddingsBatchReport {
  scenario: "batch";
  case: "embeddings";
  lines: number;
  line_bytes: number;
  /** Both idle windows pooled (before and after the batch). */
  idle: WindowReport;
  idle_before: WindowReport;
  idle_after: WindowReport;
  batch: WindowReport & {
    lines_per_s: number;
    completed: number;
    failed: number;
    status: string;
    upload_s: number;
    /** Stalls over 50 ms of the gateway's own while the file was uploaded and the batch created (before the batch window). */
    upload_gateway_stalls: number;
    /** The gateway's CPU the batch added, per line (over the idle windows' rate): main thread and all threads. */
    cpu_main_ms_per_line?: number;
    cpu_total_ms_per_line?: number;
  };
  /** TTFT p99 while the batch runs / idle (target ≤ 1.25). */
  ratio: number;
  /** The same with each window's p99 taken without the probes its CPU waits may have delayed (ttft_p99_no_cpu_wait_ms). */
  ratio_no_cpu_wait: number;
}

/** Interactive clients probing at once: a stall catches at most one request of each. */
const CLIENTS = 3;

/** The p99 of `ttfts` without the `CLIENTS` slowest per stall that was only a wait for a CPU. */
function p99WithoutCpuWaits(ttfts: readonly number[], cpuWaitStalls: number): number {
  const sorted = [...ttfts].sort((a, b) => a - b);
  return quantile(sorted.slice(0, Math.max(1, sorted.length - CLIENTS * cpuWaitStalls)), 0.99);
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

interface StallTotals {
  count: number;
  ms: number;
  gatewayCount: number;
  gatewayMs: number;
}

/** Stalls over 50 ms so far: count and total ms, all causes and the gateway's own. */
async function stallTotals(admin: string): Promise<StallTotals> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const read = (series: string, cause: string) =>
    Number(new RegExp(`^llmgw_event_loop_stall_seconds_${series}\\{cause="${cause}"\\} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  const gatewayCount = read("count", "gateway");
  const gatewayMs = read("sum", "gateway") * 1000;
  return { count: gatewayCount + read("count", "cpu_wait"), ms: gatewayMs + read("sum", "cpu_wait") * 1000, gatewayCount, gatewayMs };
}

/** Interactive probes from CLIENTS sequential clients until `until()` says stop. */
async function probe(api: string, until: () => boolean, tag: string): Promise<{ ttfts: number[]; errors: number }> {
  const ttfts: number[] = [];
  let errors = 0;
  const client = async (c: number) => {
    for (let i = 0; !until(); i++) {
      const body = JSON.stringify({ model: MODEL, stream: true, max_tokens: 4, messages: [{ role: "user", content: `interactive ${tag} ${c}-${i}` }] });
      const r = await timedStream(`${api}/v1/chat/completions`, body, { headers: auth(INTERACTIVE_KEY) });
      if (r.ok && r.events > 0) ttfts.push(r.ttftMs);
      else errors++;
      await Bun.sleep(20);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, (_, c) => client(c)));
  return { ttfts, errors };
}

interface Measured extends WindowReport {
  ttfts: number[];
  cpuMainMs?: number;
  cpuTotalMs?: number;
}

async function measure(api: string, admin: string, pid: number, tag: string, until: () => boolean): Promise<Measured> {
  const before = await stallTotals(admin);
  const cpuBefore = cpuSample(pid);
  const start = performance.now();
  const { ttfts, errors } = await probe(api, until, tag);
  const seconds = (performance.now() - start) / 1000;
  const cpu = cpuDelta(cpuBefore, cpuSample(pid));
  const after = await stallTotals(admin);
  const cpuWaitStalls = after.count - after.gatewayCount - (before.count - before.gatewayCount);
  return {
    ttfts,
    ttft_p50_ms: quantile(ttfts, 0.5),
    ttft_p99_ms: quantile(ttfts, 0.99),
    ttft_p99_no_cpu_wait_ms: p99WithoutCpuWaits(ttfts, cpuWaitStalls),
    probes: ttfts.length,
    errors,
    seconds,
    stalls: after.count - before.count,
    stalled_ms: after.ms - before.ms,
    gateway_stalls: after.gatewayCount - before.gatewayCount,
    gateway_stalled_ms: after.gatewayMs - before.gatewayMs,
    ...(cpu
      ? {
          cpuMainMs: cpu.mainNs / 1e6,
          cpuTotalMs: cpu.totalNs / 1e6,
          cpu_main_ms_per_s: cpu.mainNs / 1e6 / seconds,
          cpu_total_ms_per_s: cpu.totalNs / 1e6 / seconds,
        }
      : {}),
  };
}

/** The report of a window, without its raw samples. */
function windowReport(m: Measured): WindowReport {
  const { ttfts: _, cpuMainMs: __, cpuTotalMs: ___, ...w } = m;
  return w;
}

/** Two idle windows as one: their probes pooled, their counts and CPU added up. */
function pooled(a: Measured, b: Measured): Measured {
  const ttfts = [...a.ttfts, ...b.ttfts];
  const seconds = a.seconds + b.seconds;
  const cpuMainMs = a.cpuMainMs !== undefined && b.cpuMainMs !== undefined ? a.cpuMainMs + b.cpuMainMs : undefined;
  const cpuTotalMs = a.cpuTotalMs !== undefined && b.cpuTotalMs !== undefined ? a.cpuTotalMs + b.cpuTotalMs : undefined;
  return {
    ttfts,
    ttft_p50_ms: quantile(ttfts, 0.5),
    ttft_p99_ms: quantile(ttfts, 0.99),
    ttft_p99_no_cpu_wait_ms: p99WithoutCpuWaits(ttfts, a.stalls - a.gateway_stalls + b.stalls - b.gateway_stalls),
    probes: ttfts.length,
    errors: a.errors + b.errors,
    seconds,
    stalls: a.stalls + b.stalls,
    stalled_ms: a.stalled_ms + b.stalled_ms,
    gateway_stalls: a.gateway_stalls + b.gateway_stalls,
    gateway_stalled_ms: a.gateway_stalled_ms + b.gateway_stalled_ms,
    ...(cpuMainMs !== undefined && cpuTotalMs !== undefined
      ? { cpuMainMs, cpuTotalMs, cpu_main_ms_per_s: cpuMainMs / seconds, cpu_total_ms_per_s: cpuTotalMs / seconds }
      : {}),
  };
}

/** The JSONL of `lines` embeddings requests of about `lineBytes` of input each. */
function embeddingsJsonl(lines: number, lineBytes: number): string {
  const words = "the quick brown fox jumps over a lazy dog while batch work fills idle accelerators ".repeat(Math.ceil(lineBytes / 80)).slice(0, lineBytes);
  const out: string[] = [];
  for (let i = 0; i < lines; i++)
    out.push(`${JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/embeddings", body: { model: MODEL, input: `${i} ${words}` } })}\n`);
  return out.join("");
}

export async function runEmbeddingsBatchBench(opts: EmbeddingsBatchOptions): Promise<EmbeddingsBatchReport> {
  const log = opts.log ?? (() => {});
  const children: LlmgwChild[] = [];
  const dataDir = mkdtempSync(join(tmpdir(), "llmgw-bench-embeddings-"));
  try {
    for (let i = 0; i < opts.engines; i++) {
      const args = ["sim-engine", "--port", "0", "--model", MODEL, "--max-num-seqs", "64", "--itl-ms", "20", "--prefill-overhead-ms", "20"];
      children.push(await spawnLlmgw(args, { waitFor: 1 }));
    }
    const config = writeGatewayConfig({
      data_dir: dataDir,
      health: { poll_interval_ms: 100 },
      auth: {
        keys: [
          { key: INTERACTIVE_KEY, tenant: "chat-app", max_band: "interactive" },
          { key: BATCH_KEY, tenant: "embed-backfill", max_band: "batch" },
        ],
      },
      endpoints: children.map((s, i) => ({ id: `sim-${i + 1}`, url: s.urls.api, models: [MODEL] })),
      batch: { concurrency_per_batch: opts.concurrency, concurrency_per_tenant: opts.concurrency },
    });
    const gw = await spawnLlmgw(["serve", "--config", config, "--log-level", "info"], { waitFor: 2 });
    children.push(gw);
    const api = gw.urls.api!;
    const admin = gw.urls.admin!;
    for (const deadline = Date.now() + 15_000; (await fetch(`${admin}/readyz`)).status !== 200; ) {
      if (Date.now() > deadline) throw new Error("the gateway did not become ready");
      await Bun.sleep(50);
    }
    const pid = gw.proc.pid;
    const idleWindow = (tag: string) => {
      const end = performance.now() + opts.phaseMs;
      return measure(api, admin, pid, tag, () => performance.now() > end);
    };
    await measure(
      api,
      admin,
      pid,
      "warm-up",
      (
        (end) => () =>
          performance.now() > end
      )(performance.now() + 500),
    );
    log("idle window");
    const idleBefore = await idleWindow("idle");

    log(`uploading ${opts.lines} lines of ${opts.lineBytes} bytes`);
    const beforeUpload = await stallTotals(admin);
    const uploadStart = performance.now();
    const form = new FormData();
    form.append("purpose", "batch");
    form.append("file", new File([embeddingsJsonl(opts.lines, opts.lineBytes)], "embeddings.jsonl"));
    const file = (await (await fetch(`${api}/v1/files`, { method: "POST", headers: auth(BATCH_KEY), body: form })).json()) as { id: string };
    const created = (await (
      await fetch(`${api}/v1/batches`, {
        method: "POST",
        headers: { "content-type": "application/json", ...auth(BATCH_KEY) },
        body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/embeddings", completion_window: "24h" }),
      })
    ).json()) as { id: string };
    const uploadS = (performance.now() - uploadStart) / 1000;
    const uploadStalls = (await stallTotals(admin)).gatewayCount - beforeUpload.gatewayCount;
    log("the batch runs");
    let status = "in_progress";
    let counts = { completed: 0, failed: 0 };
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const b = (await (await fetch(`${api}/v1/batches/${created.id}`, { headers: auth(BATCH_KEY) })).json()) as {
          status: string;
          request_counts: { completed: number; failed: number };
        };
        status = b.status;
        counts = b.request_counts;
        await Bun.sleep(200);
      }
    })();
    const batchStart = performance.now();
    const batchEnd = batchStart + opts.maxBatchMs;
    const during = await measure(
      api,
      admin,
      pid,
      "batch",
      () => ["completed", "failed", "cancelled", "expired"].includes(status) || performance.now() > batchEnd,
    );
    polling = false;
    await poller;
    const seconds = (performance.now() - batchStart) / 1000;
    log("idle window after the batch");
    const idleAfter = await idleWindow("idle-after");
    const idle = pooled(idleBefore, idleAfter);
    const lines = counts.completed + counts.failed;
    // What the batch added to the gateway's CPU, per line: the window's CPU over what the same time idle would have cost.
    const perLine = (ms: number | undefined, idleRate: number | undefined) =>
      ms !== undefined && idleRate !== undefined && lines > 0 ? (ms - idleRate * during.seconds) / lines : undefined;
    const cpuMain = perLine(during.cpuMainMs, idle.cpu_main_ms_per_s);
    const cpuTotal = perLine(during.cpuTotalMs, idle.cpu_total_ms_per_s);
    return {
      scenario: "batch",
      case: "embeddings",
      lines: opts.lines,
      line_bytes: opts.lineBytes,
      idle: windowReport(idle),
      idle_before: windowReport(idleBefore),
      idle_after: windowReport(idleAfter),
      batch: {
        ...windowReport(during),
        lines_per_s: lines / seconds,
        completed: counts.completed,
        failed: counts.failed,
        status,
        upload_s: uploadS,
        upload_gateway_stalls: uploadStalls,
        ...(cpuMain !== undefined && cpuTotal !== undefined ? { cpu_main_ms_per_line: cpuMain, cpu_total_ms_per_line: cpuTotal } : {}),
      },
      ratio: during.ttft_p99_ms / idle.ttft_p99_ms,
      ratio_no_cpu_wait: during.ttft_p99_no_cpu_wait_ms / idle.ttft_p99_no_cpu_wait_ms,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  }
}
