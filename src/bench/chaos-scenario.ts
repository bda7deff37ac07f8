/**
 * `llmgw bench chaos`: streams that survive their engine. Two or
 * three sim-engines behind one gateway; the first is killed (SIGKILL) and
 * restarted on the same port on a schedule while the streams run, a bounded
 * number at a time. Every answer is checked against the same request
 * answered undisturbed by a separate sim-engine (the sim's text is a
 * function of the prompt, seed and position): completed intact, recovered
 * (continued on another replica), failed — the target is 0 failed while a
 * healthy replica remains — and how long the recovered segments took to
 * their first token.
 */
import { parsePrometheusText, sumSamples } from "../engines/prom-text.ts";
import { boolFlag, numberFlag, stringFlag } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import { transcriptOf } from "./answer-transcript.ts";
import { histogramQuantile } from "./prom-histogram.ts";
import { longestGapMs, type RecordedStream, recordStream } from "./recorded-stream.ts";
import { formatTable, quantile } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";

const MODEL = "bench-chaos-model";
const VICTIM = "sim-1";

export interface ChaosOptions {
  engines: number;
  streams: number;
  concurrency: number;
  tokens: number;
  itlMs: number;
  killEveryMs: number;
  downMs: number;
  /** The gateway's retry.budget_ratio (undefined: its default); each continuation takes a retry from the budget. */
  budgetRatio: number | undefined;
}

export interface ChaosReport {
  scenario: "chaos";
  engines: number;
  streams: number;
  concurrency: number;
  tokens: number;
  itl_ms: number;
  /** The gateway's retry.budget_ratio ("default" when not set). */
  budget_ratio: number | "default";
  kills: number;
  /** Streams whose client read one whole answer, byte-identical to the undisturbed one. */
  completed_intact: number;
  /** Breaks the gateway mended with a continuation (llmgw_stream_recoveries_total{result="recovered"}). */
  recovered: number;
  /** Streams on the killed engine with tokens out when it was killed (the client's view of the same). */
  cut_by_a_kill: number;
  failed: number;
  first_failures: string[];
  /** Every break by how the gateway handled it. */
  recovery_results: Record<string, number>;
  /** Break → first token of the continuation, from the gateway's histogram (bucket-interpolated). */
  recovered_ttft_ms: { p50: number; p99: number };
  /** The longest wait between two events in each stream cut by a kill, as its client saw it. */
  longest_gap_ms: { p50: number; p99: number; max: number };
  duration_ms: number;
}

function simArgs(o: ChaosOptions, itlMs: number, port = 0): string[] {
  const out = String(o.tokens * 4);
  return [
    "sim-engine",
    "--port",
    String(port),
    "--model",
    MODEL,
    "--itl-ms",
    String(itlMs),
    "--output-len",
    out,
    "--max-num-seqs",
    "1024",
    "--batch-slowdown",
    "0",
    "--prefill-overhead-ms",
    "5",
  ];
}

function requestBody(i: number, tokens: number, stream: boolean): string {
  const messages = [{ role: "user", content: `chaos stream ${i}: tell a long story` }];
  return JSON.stringify(
    stream
      ? { model: MODEL, messages, max_tokens: tokens, seed: i, stream: true, stream_options: { include_usage: true } }
      : { model: MODEL, messages, max_tokens: tokens, seed: i },
  );
}

/** Restart the killed engine on its port (the kernel may hold the port for a moment). */
async function restart(args: string[]): Promise<LlmgwChild> {
  for (let tryNo = 0; ; tryNo++) {
    try {
      return await spawnLlmgw(args);
    } catch (err) {
      if (tryNo >= 20) throw err;
      await Bun.sleep(100);
    }
  }
}

export async function runChaos(o: ChaosOptions): Promise<ChaosReport> {
  const children: LlmgwChild[] = [];
  const started = performance.now();
  try {
    const sims = await Promise.all(Array.from({ length: o.engines }, () => spawnLlmgw(simArgs(o, o.itlMs))));
    const reference = await spawnLlmgw(simArgs(o, 0));
    children.push(...sims, reference);
    const urls = sims.map((s) => s.urls.api ?? s.url);
    const gw = await spawnLlmgw(
      [
        "serve",
        "--config",
        writeGatewayConfig({
          admission: { initial_capacity: 1024 },
          health: { poll_interval_ms: 100 },
          ...(o.budgetRatio === undefined ? {} : { retry: { budget_ratio: o.budgetRatio } }),
          endpoints: urls.map((url, i) => ({ id: `sim-${i + 1}`, url, models: [MODEL] })),
        }),
      ],
      { waitFor: 2 },
    );
    children.push(gw);
    await waitReady(gw.urls.admin!, o.engines);

    let victim = sims[0]!;
    const victimArgs = simArgs(o, o.itlMs, Number(new URL(urls[0]!).port));
    const kills: number[] = [];
    let loadDone = false;
    const chaos = (async () => {
      while (!loadDone) {
        await Bun.sleep(o.killEveryMs);
        // A kill between the victim's streams cuts nothing: wait (a bounded while) until the gateway has one there.
        await untilServing(gw.urls.admin!, VICTIM, () => loadDone);
        if (loadDone) break;
        kills.push(performance.now());
        await victim.stop("SIGKILL");
        await Bun.sleep(o.downMs);
        victim = await restart(victimArgs);
        children.push(victim);
      }
    })();

    const results: RecordedStream[] = new Array(o.streams);
    let next = 0;
    const url = `${gw.urls.api}/v1/chat/completions`;
    await Promise.all(
      Array.from({ length: o.concurrency }, async () => {
        for (let i = next++; i < o.streams; i = next++) results[i] = await recordStream(url, requestBody(i, o.tokens, true));
      }),
    );
    loadDone = true;
    await chaos;

    const metrics = parsePrometheusText(await (await fetch(`${gw.urls.admin}/metrics`)).text()).samples;
    const report = await judge(o, results, kills, `${reference.urls.api ?? reference.url}/v1/chat/completions`);
    const byResult: Record<string, number> = {};
    for (const s of metrics) if (s.name === "llmgw_stream_recoveries_total") byResult[s.labels.result!] = (byResult[s.labels.result!] ?? 0) + s.value;
    return {
      ...report,
      recovered: sumSamples(metrics, "llmgw_stream_recoveries_total", { result: "recovered" }) ?? 0,
      recovery_results: byResult,
      recovered_ttft_ms: {
        p50: histogramQuantile(metrics, "llmgw_stream_recovery_seconds", 0.5) * 1000,
        p99: histogramQuantile(metrics, "llmgw_stream_recovery_seconds", 0.99) * 1000,
      },
      duration_ms: performance.now() - started,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

/** How long a kill waits for the victim to hold a stream before it goes ahead anyway. */
const SERVING_WAIT_MS = 3_000;

/** Until the gateway holds a request on endpoint `id` (its in-flight count above 0), `stop()` says so, or SERVING_WAIT_MS pass. */
async function untilServing(admin: string, id: string, stop: () => boolean): Promise<void> {
  const deadline = performance.now() + SERVING_WAIT_MS;
  while (!stop() && performance.now() < deadline) {
    const body = (await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { id: string; inflight: number }[] };
    if ((body.endpoints.find((e) => e.id === id)?.inflight ?? 0) > 0) return;
    await Bun.sleep(10);
  }
}

async function waitReady(admin: string, n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const body = (await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
    if (body.endpoints.filter((e) => e.ready).length >= n) return;
    await Bun.sleep(50);
  }
  throw new Error(`the gateway never saw ${n} ready engines`);
}

/** Check every stream against its undisturbed answer; time the streams a kill cut. */
async function judge(o: ChaosOptions, results: readonly RecordedStream[], kills: readonly number[], referenceUrl: string) {
  const failures: string[] = [];
  let intact = 0;
  const gaps: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: 32 }, async () => {
      for (let i = next++; i < results.length; i = next++) {
        const r = results[i]!;
        const want = (await (
          await fetch(referenceUrl, { method: "POST", headers: { "content-type": "application/json" }, body: requestBody(i, o.tokens, false) })
        ).json()) as {
          choices: { message: { content: string }; finish_reason: string }[];
          usage: { prompt_tokens: number; completion_tokens: number };
        };
        const cut = r.endpoint === VICTIM && kills.some((k) => r.arrivals.length > 0 && r.arrivals[0]! < k && r.endedAt > k);
        if (cut) gaps.push(longestGapMs(r));
        const defect = r.failure ?? defectOf(r, want.choices[0]!.message.content, want.choices[0]!.finish_reason, want.usage);
        if (defect === undefined) intact++;
        else if (failures.length < 5) failures.push(`stream ${i}${cut ? " (cut by a kill)" : ""}: ${defect}`);
      }
    }),
  );
  return {
    scenario: "chaos" as const,
    engines: o.engines,
    streams: o.streams,
    concurrency: o.concurrency,
    tokens: o.tokens,
    itl_ms: o.itlMs,
    budget_ratio: o.budgetRatio ?? ("default" as const),
    kills: kills.length,
    completed_intact: intact,
    cut_by_a_kill: gaps.length,
    failed: results.length - intact,
    first_failures: failures,
    longest_gap_ms: { p50: quantile(gaps, 0.5), p99: quantile(gaps, 0.99), max: gaps.length > 0 ? Math.max(...gaps) : NaN },
  };
}

/** What is wrong with a recorded answer compared with the undisturbed one (undefined: nothing). */
function defectOf(r: RecordedStream, text: string, finish: string, usage: { prompt_tokens: number; completion_tokens: number }): string | undefined {
  const t = transcriptOf(r.payloads, "chat");
  if (t.errors.length > 0) return `error event ${t.errors.join(",")}`;
  if (t.done !== 1) return `${t.done} [DONE]`;
  if (t.ids.size !== 1 || t.roles !== 1) return `${t.ids.size} stream ids, ${t.roles} role deltas`;
  if (t.finishes.length !== 1 || t.finishes[0] !== finish) return `finish reasons ${JSON.stringify(t.finishes)}`;
  if (t.text !== text) return `text differs after ${[...t.text].findIndex((c, i) => c !== [...text][i])} characters`;
  const u = t.usages[0] as { prompt_tokens?: number; completion_tokens?: number } | undefined;
  if (t.usages.length !== 1 || u?.prompt_tokens !== usage.prompt_tokens || u?.completion_tokens !== usage.completion_tokens)
    return `usage ${JSON.stringify(t.usages)}`;
  return undefined;
}

const USAGE = `usage: llmgw bench chaos [--engines N] [--streams N] [--concurrency N] [--tokens N] [--itl-ms MS] [--kill-every-ms MS] [--down-ms MS] [--budget-ratio R] [--json]

Sim-engines behind one gateway; the first is killed (SIGKILL) and restarted
on the same port every --kill-every-ms while the streams run. Every answer
is checked against the same request answered undisturbed. Reports streams
completed intact, breaks recovered by a continuation on another replica,
failed streams (target 0), and the recovered segments' time to first token.

flags:
  --engines N        sim-engines, 2 or 3 (default 3)
  --streams N        streams in all (default 200)
  --concurrency N    streams at a time (default 50)
  --tokens N         tokens per answer (default 64)
  --itl-ms MS        sim-engine inter-token latency (default 15)
  --kill-every-ms MS time between kills (default 1500)
  --down-ms MS       how long the killed engine stays down (default 500)
  --budget-ratio R   the gateway's retry.budget_ratio (default: its own, 0.2);
                     every continuation takes a retry from that budget
  --json             one JSON object instead of the table`;

export const chaosScenario: BenchScenario = {
  name: "chaos",
  summary: "one of 2-3 sim-engines killed and restarted under streaming load: streams intact, recovered, failed",
  usage: USAGE,
  options: {
    engines: { type: "string" },
    streams: { type: "string" },
    concurrency: { type: "string" },
    tokens: { type: "string" },
    "itl-ms": { type: "string" },
    "kill-every-ms": { type: "string" },
    "down-ms": { type: "string" },
    "budget-ratio": { type: "string" },
  },
  async run(args) {
    const o: ChaosOptions = {
      engines: numberFlag(args, "engines", 3, { min: 2, max: 3, integer: true }),
      streams: numberFlag(args, "streams", 200, { min: 1, max: 100_000, integer: true }),
      concurrency: numberFlag(args, "concurrency", 50, { min: 1, max: 5_000, integer: true }),
      tokens: numberFlag(args, "tokens", 64, { min: 8, max: 4096, integer: true }),
      itlMs: numberFlag(args, "itl-ms", 15, { min: 1, max: 1000 }),
      killEveryMs: numberFlag(args, "kill-every-ms", 1500, { min: 100, max: 600_000, integer: true }),
      downMs: numberFlag(args, "down-ms", 500, { min: 0, max: 600_000, integer: true }),
      budgetRatio: stringFlag(args, "budget-ratio") === undefined ? undefined : numberFlag(args, "budget-ratio", 0.2, { min: 0, max: 10 }),
    };
    const r = await runChaos(o);
    if (boolFlag(args, "json")) console.log(JSON.stringify(r));
    else {
      const title = `llmgw bench chaos — ${r.engines} sim-engines, ${VICTIM} killed every ${o.killEveryMs} ms (down ${o.downMs} ms): ${r.kills} kills, ${r.streams} streams of ${r.tokens} tokens, ${r.concurrency} at a time, itl ${r.itl_ms} ms, retry budget ratio ${r.budget_ratio}`;
      const ms = (n: number) => (Number.isNaN(n) ? "-" : Math.round(n));
      const rows: (string | number)[][] = [
        ["streams completed intact", r.completed_intact],
        ["streams cut by a kill (client view)", r.cut_by_a_kill],
        ["breaks recovered (gateway)", r.recovered],
        ["streams failed", r.failed],
        ["recovered segment TTFT p50 / p99 (ms, gateway)", `${ms(r.recovered_ttft_ms.p50)} / ${ms(r.recovered_ttft_ms.p99)}`],
        ["longest gap in a cut stream p50 / p99 / max (ms, client)", `${ms(r.longest_gap_ms.p50)} / ${ms(r.longest_gap_ms.p99)} / ${ms(r.longest_gap_ms.max)}`],
        [
          "breaks by result (gateway)",
          Object.entries(r.recovery_results)
            .map(([k, v]) => `${k} ${v}`)
            .join(", ") || "-",
        ],
      ];
      console.log(formatTable({ title, columns: ["", "value"], rows }));
      for (const f of r.first_failures) console.log(`failed: ${f}`);
    }
    return r.failed === 0 ? 0 : 1;
  },
};
