/**
 * `llmgw bench batch --case embeddings`: a large embeddings batch (10,000
 * lines of ~8 KB each by default) through the Files and Batches API while
 * three interactive clients stream chat completions. Measures interactive
 * TTFT with no batch (idle) and while the batch runs, the gateway's event
 * loop stalls over 50 ms in each window (llmgw_event_loop_stall_seconds),
 * and the batch's lines/s. Targets: no stall added by the batch, TTFT p99
 * during / idle ≤ 1.25.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnLlmgw, writeGatewayConfig, type LlmgwChild } from "../shared/llmgw-child.ts";
import { quantile } from "./report.ts";
import { timedStream } from "./stream-client.ts";

const MODEL = "bench-model";
const INTERACTIVE_KEY = "interactive-key-for-bench";
const BATCH_KEY = "batch-key-for-bench";

export interface EmbeddingsBatchOptions {
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

export interface WindowReport {
  ttft_p50_ms: number;
  ttft_p99_ms: number;
  probes: number;
  errors: number;
  seconds: number;
  stalls: number;
  stalled_ms: number;
}

export interface EmbeddingsBatchReport {
  scenario: "batch";
  case: "embeddings";
  lines: number;
  line_bytes: number;
  idle: WindowReport;
  batch: WindowReport & { lines_per_s: number; completed: number; failed: number; status: string; upload_s: number };
  /** TTFT p99 while the batch runs / idle (target ≤ 1.25). */
  ratio: number;
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });

/** Stalls over 50 ms so far: count and total ms. */
async function stallTotals(admin: string): Promise<{ count: number; ms: number }> {
  const text = await (await fetch(`${admin}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, "m").exec(text)?.[1] ?? 0);
  return { count: read("llmgw_event_loop_stall_seconds_count"), ms: read("llmgw_event_loop_stall_seconds_sum") * 1000 };
}

/** Interactive probes from three sequential clients until `until()` says stop. */
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
  await Promise.all([client(0), client(1), client(2)]);
  return { ttfts, errors };
}

async function measure(api: string, admin: string, tag: string, until: () => boolean): Promise<WindowReport> {
  const before = await stallTotals(admin);
  const start = performance.now();
  const { ttfts, errors } = await probe(api, until, tag);
  const after = await stallTotals(admin);
  return {
    ttft_p50_ms: quantile(ttfts, 0.5),
    ttft_p99_ms: quantile(ttfts, 0.99),
    probes: ttfts.length,
    errors,
    seconds: (performance.now() - start) / 1000,
    stalls: after.count - before.count,
    stalled_ms: after.ms - before.ms,
  };
}

/** The JSONL of `lines` embeddings requests of about `lineBytes` of input each. */
export function embeddingsJsonl(lines: number, lineBytes: number): string {
  const words = "the quick brown fox jumps over a lazy dog while batch work fills idle accelerators ".repeat(Math.ceil(lineBytes / 80)).slice(0, lineBytes);
  const out: string[] = [];
  for (let i = 0; i < lines; i++) out.push(`${JSON.stringify({ custom_id: `req-${i}`, method: "POST", url: "/v1/embeddings", body: { model: MODEL, input: `${i} ${words}` } })}\n`);
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
    await measure(api, admin, "warm-up", ((end) => () => performance.now() > end)(performance.now() + 500));
    log("idle window");
    const idleEnd = performance.now() + opts.phaseMs;
    const idle = await measure(api, admin, "idle", () => performance.now() > idleEnd);

    log(`uploading ${opts.lines} lines of ${opts.lineBytes} bytes`);
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
    log("the batch runs");
    let status = "in_progress";
    let counts = { completed: 0, failed: 0 };
    let polling = true;
    const poller = (async () => {
      while (polling) {
        const b = (await (await fetch(`${api}/v1/batches/${created.id}`, { headers: auth(BATCH_KEY) })).json()) as { status: string; request_counts: { completed: number; failed: number } };
        status = b.status;
        counts = b.request_counts;
        await Bun.sleep(200);
      }
    })();
    const batchStart = performance.now();
    const batchEnd = batchStart + opts.maxBatchMs;
    const during = await measure(api, admin, "batch", () => ["completed", "failed", "cancelled", "expired"].includes(status) || performance.now() > batchEnd);
    polling = false;
    await poller;
    const seconds = (performance.now() - batchStart) / 1000;
    return {
      scenario: "batch",
      case: "embeddings",
      lines: opts.lines,
      line_bytes: opts.lineBytes,
      idle,
      batch: { ...during, lines_per_s: (counts.completed + counts.failed) / seconds, completed: counts.completed, failed: counts.failed, status, upload_s: uploadS },
      ratio: during.ttft_p99_ms / idle.ttft_p99_ms,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
    rmSync(dataDir, { recursive: true, force: true });
  }
}
