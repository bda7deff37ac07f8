/**
 * `llmgw bench lora`: what routing on LoRA adapters saves. Replicas of one
 * base model on sim-engines (vLLM's LoRA flags: every adapter registered,
 * `--max-loras` GPU slots each), a Zipf-skewed adapter workload
 * (lora-workload.ts), and one gateway per policy, each over fresh engines:
 * `llmgw` (the default profile: lora-affinity with the load scorers),
 * `load-only` (the load scorers alone) and `random`. Per policy: adapter
 * loads per 1,000 requests (copies into a GPU slot, counted by the engines),
 * TTFT p50/p90 and output tokens per second. The routing bench runs the same
 * workload and policies through runLoraPolicy.
 */
import { boolFlag, numberFlag, stringFlag, UsageError } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";
import {
  type ClockSample,
  engineClockCell,
  engineClockReport,
  engineClocksLine,
  STRICT_USAGE,
  sampleEngineClocks,
  strictVerdict,
} from "./engine-clock-report.ts";
import { LORA_POLICIES, LORA_POLICY_SCHEDULING, type LoraBenchOptions, type LoraBenchReport, type LoraPolicy, type LoraPolicyResult } from "./lora-policies.ts";
import { runLoraPolicyTwin } from "./lora-twin.ts";
import { formatLoraTwinCheck, loraTwinCheck } from "./lora-twin-check.ts";
import { buildLoraWorkload, DEFAULT_LORA_WORKLOAD, type LoraWorkload, loraSimArgs, simAdapterLoads } from "./lora-workload.ts";
import { formatTable, quantile } from "./report.ts";
import type { BenchScenario } from "./scenario.ts";
import { timedStream } from "./stream-client.ts";

interface Sample {
  ok: boolean;
  ttftMs: number;
}

/**
 * Send the workload's requests at their times (divided by `timeScale`) to
 * `api`. `onMeasureStart` runs as the first measured request is sent (the
 * warm-up's are in flight or done); the measured requests' TTFT and the wall
 * ms from then to the last answer come back.
 */
export async function driveLoraWorkload(
  api: string,
  w: LoraWorkload,
  timeScale: number,
  onMeasureStart: () => Promise<void> = async () => {},
): Promise<{ samples: Sample[]; wallMs: number }> {
  const t0 = performance.now();
  let measuredFrom = t0;
  let measuring = false;
  const samples: Sample[] = [];
  const pending: Promise<void>[] = [];
  for (const r of w.requests) {
    const wait = t0 + r.atMs / timeScale - performance.now();
    if (wait > 1) await Bun.sleep(wait);
    if (!r.warmup && !measuring) {
      measuring = true;
      await onMeasureStart();
      measuredFrom = performance.now();
    }
    const measured = !r.warmup;
    pending.push(
      timedStream(`${api}/v1/chat/completions`, r.body).then((s) => {
        if (measured) samples.push({ ok: s.ok && s.events > 0, ttftMs: s.ttftMs });
      }),
    );
  }
  await Promise.all(pending);
  return { samples, wallMs: performance.now() - measuredFrom };
}

async function generatedTokens(sims: readonly LlmgwChild[]): Promise<number> {
  let total = 0;
  for (const s of sims) {
    const text = await (await fetch(`${s.url}/metrics`)).text();
    const m = /^vllm:generation_tokens_total(?:\{[^}]*\})? (\S+)$/m.exec(text);
    total += m ? Number(m[1]) : 0;
  }
  return total;
}

async function waitReady(admin: string, n: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const r = (await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
    if (r.endpoints.filter((e) => e.ready).length >= n) return;
    await Bun.sleep(100);
  }
  throw new Error(`the gateway did not see ${n} ready endpoints in ${timeoutMs} ms`);
}

/** One policy over fresh sim-engines (cold adapter caches), its own gateway; stops both. */
export async function runLoraPolicy(w: LoraWorkload, policy: LoraPolicy, opts: Omit<LoraBenchOptions, "workload" | "policies">): Promise<LoraPolicyResult> {
  const children: LlmgwChild[] = [];
  try {
    const simArgs = [
      "sim-engine",
      "--port",
      "0",
      ...loraSimArgs(w),
      "--time-scale",
      String(opts.timeScale),
      ...(opts.profile ? ["--profile", opts.profile] : []),
    ];
    const sims = await Promise.all(Array.from({ length: opts.replicas }, () => spawnLlmgw(simArgs)));
    children.push(...sims);
    const scheduling = LORA_POLICY_SCHEDULING[policy];
    const gw = await spawnLlmgw(
      [
        "serve",
        "--config",
        writeGatewayConfig({
          log_level: "warn",
          ...(scheduling ? { scheduling } : {}),
          endpoints: sims.map((s, i) => ({ id: `replica-${i}`, url: s.url, models: [w.options.base] })),
        }),
        "--log-level",
        "info",
      ],
      { waitFor: 2 },
    );
    children.push(gw);
    await waitReady(gw.urls.admin!, sims.length, 30_000);
    // Adapters are known once /v1/models was polled.
    for (let i = 0; i < 100; i++) {
      const models = (await (await fetch(`${gw.urls.api}/v1/models`)).json()) as { data: unknown[] };
      if (models.data.length > w.adapters.length) break;
      await Bun.sleep(100);
    }
    let tokens0 = 0;
    let loads0: { gpuLoads: number }[] = [];
    let clock0: ClockSample[] = [];
    const { samples, wallMs } = await driveLoraWorkload(gw.urls.api!, w, opts.timeScale, async () => {
      [tokens0, loads0, clock0] = await Promise.all([
        generatedTokens(sims),
        Promise.all(sims.map((s) => simAdapterLoads(s.url))),
        sampleEngineClocks(sims.map((s) => s.url)),
      ]);
    });
    const clock = engineClockReport(clock0, await sampleEngineClocks(sims.map((s) => s.url)));
    const loads1 = await Promise.all(sims.map((s) => simAdapterLoads(s.url)));
    const tokens = (await generatedTokens(sims)) - tokens0;
    const loads = loads1.reduce((a, l, i) => a + l.gpuLoads - loads0[i]!.gpuLoads, 0);
    const ok = samples.filter((s) => s.ok);
    // The sims' clock runs timeScale times faster: their simulated times are the wall's × timeScale.
    const simMs = wallMs * opts.timeScale;
    return {
      policy,
      requests: samples.length,
      errors: samples.length - ok.length,
      adapter_loads: loads,
      loads_per_1000: (loads / samples.length) * 1000,
      ttft_p50_ms: quantile(
        ok.map((s) => s.ttftMs * opts.timeScale),
        0.5,
      ),
      ttft_p90_ms: quantile(
        ok.map((s) => s.ttftMs * opts.timeScale),
        0.9,
      ),
      output_tokens: tokens,
      output_tok_per_s: tokens / (simMs / 1000),
      duration_s: simMs / 1000,
      engine_clock: clock,
    };
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
}

export async function runLoraBench(opts: LoraBenchOptions): Promise<LoraBenchReport> {
  const w = buildLoraWorkload(opts.workload);
  const share = (k: number) => w.popularity.slice(0, k).reduce((a, b) => a + b, 0);
  const results: LoraPolicyResult[] = [];
  for (const policy of opts.policies) {
    opts.log?.(`  ${policy}: ${opts.workload.warmup} + ${opts.workload.requests} requests over ${w.adapters.length} adapters on ${opts.replicas} replicas …`);
    const r = await (opts.twin ? runLoraPolicyTwin : runLoraPolicy)(w, policy, opts);
    opts.log?.(`  ${policy}: ${r.loads_per_1000.toFixed(1)} loads/1000, TTFT p90 ${r.ttft_p90_ms.toFixed(0)} ms, ${r.errors} errors`);
    results.push(r);
  }
  const mine = results.find((r) => r.policy === "llmgw");
  const random = results.find((r) => r.policy === "random");
  return {
    scenario: "lora",
    clock: opts.twin ? "twin" : "real-time",
    replicas: opts.replicas,
    time_scale: opts.timeScale,
    workload: { ...opts.workload },
    top_shares: { top1: share(1), top4: share(4), top16: share(16) },
    results,
    ...(mine && random
      ? { loads_ratio_vs_random: random.loads_per_1000 / mine.loads_per_1000, ttft_p90_ratio_vs_random: mine.ttft_p90_ms / random.ttft_p90_ms }
      : {}),
  };
}

/** The report as the bench prints it: the table, whether the engines kept their clock, llmgw against random. */
function formatLoraText(r: LoraBenchReport): string {
  const wl = r.workload;
  const lines = [
    formatTable({
      title: `llmgw bench lora${r.clock === "twin" ? " (fleet twin)" : ""} — ${r.replicas} replicas × ${wl.maxLoras} GPU slots, ${wl.adapters} adapters (Zipf ${wl.zipfS}: top 4 get ${(r.top_shares.top4 * 100).toFixed(0)} %), ${wl.requests} requests after ${wl.warmup} of warm-up, at ${wl.ratePerS}/s${r.time_scale !== 1 && r.clock !== "twin" ? `, time scale ${r.time_scale}` : ""}`,
      columns: ["policy", "adapter loads", "loads / 1000 req", "TTFT p50 ms", "TTFT p90 ms", "output tok/s", "errors", "engines late p99 ms / slipped"],
      rows: r.results.map((x) => [
        x.policy,
        x.adapter_loads,
        x.loads_per_1000,
        x.ttft_p50_ms,
        x.ttft_p90_ms,
        x.output_tok_per_s,
        x.errors,
        engineClockCell(x.engine_clock),
      ]),
    }),
  ];
  const clocks = engineClocksLine(r.results.map((x) => ({ name: x.policy, clock: x.engine_clock })));
  if (clocks) lines.push(`\n${clocks}`);
  if (r.loads_ratio_vs_random !== undefined && r.ttft_p90_ratio_vs_random !== undefined)
    lines.push(
      `\nllmgw vs random: ${r.loads_ratio_vs_random.toFixed(2)}× fewer adapter loads (target ≥ 3), TTFT p90 ${r.ttft_p90_ratio_vs_random.toFixed(2)}× random's (target ≤ 1)`,
    );
  return lines.join("\n");
}

const USAGE = `usage: llmgw bench lora [--adapters N] [--zipf S] [--requests N] [--warmup N] [--rate R] [--replicas N]
                        [--max-loras N] [--max-tokens N] [--policies LIST] [--time-scale X] [--profile NAME] [--twin | --check] [--strict] [--json]

Replicas of one base model on sim-engines with LoRA (every adapter registered,
--max-loras GPU slots each) under a Zipf-skewed adapter workload, routed by
each policy through its own gateway over fresh engines: llmgw (the default
profile, lora-affinity included), load-only (queue-depth, kv-cache,
inflight) and random. Prints adapter loads per 1,000 requests, TTFT p50/p90
and output tokens/s per policy.

flags:
  --adapters N     adapters, named adapter-0 … by popularity (default ${DEFAULT_LORA_WORKLOAD.adapters})
  --zipf S         popularity exponent: P(rank k) ∝ 1/k^S (default ${DEFAULT_LORA_WORKLOAD.zipfS})
  --requests N     requests measured per policy (default ${DEFAULT_LORA_WORKLOAD.requests})
  --warmup N       requests sent first and not counted (default ${DEFAULT_LORA_WORKLOAD.warmup})
  --rate R         mean arrivals per second, Poisson (default ${DEFAULT_LORA_WORKLOAD.ratePerS})
  --replicas N     sim-engines (default 4)
  --max-loras N    GPU slots per replica (default ${DEFAULT_LORA_WORKLOAD.maxLoras})
  --max-tokens N   cap on each answer (default ${DEFAULT_LORA_WORKLOAD.maxTokens}; answers end at their natural length)
  --policies LIST  which policies, in order (default ${LORA_POLICIES.join(",")})
  --time-scale X   the sims' clock runs X times faster; arrivals follow; TTFT and tokens/s are reported in simulated units (default 1)
  --profile NAME   sim-engine profile (default the sim's: H100 × Llama-3.1-8B)
  --twin           run each policy in the fleet twin: the gateway's own routing and
                   admission modules and the sim-engine's core (adapter slots
                   included) on a virtual clock, in this process; the same report,
                   deterministic whatever the host's load (--time-scale is ignored)
  --check          run the workload both ways, real-time then the twin, and print
                   each policy's figures side by side with the twin's error and
                   whether both rank the policies alike by adapter loads
${STRICT_USAGE}
  --json           one JSON object instead of the table`;

function policiesFlag(raw: string | undefined): LoraPolicy[] {
  if (raw === undefined) return [...LORA_POLICIES];
  const list = raw
    .split(",")
    .map((p) => p.trim())
    .filter((p) => p !== "");
  for (const p of list)
    if (!(LORA_POLICIES as readonly string[]).includes(p)) throw new UsageError(`--policies: expected some of ${LORA_POLICIES.join(", ")}, got '${p}'`);
  if (list.length === 0) throw new UsageError("--policies: expected at least one policy");
  return list as LoraPolicy[];
}

export const loraScenario: BenchScenario = {
  name: "lora",
  summary: "LoRA adapters under skewed popularity: adapter loads per 1,000 requests, TTFT p90, tokens/s — llmgw vs load-only vs random",
  usage: USAGE,
  options: {
    adapters: { type: "string" },
    zipf: { type: "string" },
    requests: { type: "string" },
    warmup: { type: "string" },
    rate: { type: "string" },
    replicas: { type: "string" },
    "max-loras": { type: "string" },
    "max-tokens": { type: "string" },
    policies: { type: "string" },
    "time-scale": { type: "string" },
    profile: { type: "string" },
    twin: { type: "boolean" },
    check: { type: "boolean" },
    strict: { type: "boolean" },
  },
  async run(args) {
    const json = boolFlag(args, "json");
    const d = DEFAULT_LORA_WORKLOAD;
    const profile = stringFlag(args, "profile");
    const o: LoraBenchOptions = {
      workload: {
        ...d,
        adapters: numberFlag(args, "adapters", d.adapters, { min: 1, max: 1024, integer: true }),
        zipfS: numberFlag(args, "zipf", d.zipfS, { min: 0, max: 5 }),
        requests: numberFlag(args, "requests", d.requests, { min: 1, max: 1_000_000, integer: true }),
        warmup: numberFlag(args, "warmup", d.warmup, { min: 0, max: 1_000_000, integer: true }),
        ratePerS: numberFlag(args, "rate", d.ratePerS, { min: 0.01, max: 100_000 }),
        maxLoras: numberFlag(args, "max-loras", d.maxLoras, { min: 1, max: 1024, integer: true }),
        maxTokens: numberFlag(args, "max-tokens", d.maxTokens, { min: 1, max: 100_000, integer: true }),
      },
      replicas: numberFlag(args, "replicas", 4, { min: 1, max: 64, integer: true }),
      policies: policiesFlag(stringFlag(args, "policies")),
      timeScale: numberFlag(args, "time-scale", 1, { min: 0.01, max: 1000 }),
      ...(profile ? { profile } : {}),
      twin: boolFlag(args, "twin"),
      log: json ? undefined : (l) => console.error(l),
    };
    if (boolFlag(args, "check")) {
      if (o.twin) throw new UsageError("--check runs the real-time stack and the twin: leave --twin out");
      const real = await runLoraBench(o);
      const inTwin = await runLoraBench({ ...o, twin: true });
      const check = loraTwinCheck(real, inTwin);
      if (json) console.log(JSON.stringify({ scenario: "lora-twin-check", real, twin: inTwin, check }));
      else console.log(`${formatLoraText(real)}\n\n${formatLoraText(inTwin)}\n\n${formatLoraTwinCheck(check)}`);
      return strictVerdict(
        args,
        real.results.map((x) => x.engine_clock),
      );
    }
    const r = await runLoraBench(o);
    const strict = strictVerdict(
      args,
      r.results.map((x) => x.engine_clock),
    );
    if (json) {
      console.log(JSON.stringify(r));
      return strict;
    }
    console.log(formatLoraText(r));
    return strict;
  },
};
