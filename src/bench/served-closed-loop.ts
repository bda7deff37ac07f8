/**
 * A closed loop against a served engine, from a process of its own, as
 * `vllm bench serve --max-concurrency C --request-rate inf --ignore-eos`
 * drives a server: `concurrency` streaming completions in flight until
 * `requests` were sent, each a prompt of exactly `inputTokens` token ids
 * that shares no block with any other (its first id is its own), answering
 * the lengths answerLengths() gives. It measures what that client reports,
 * in the shape of the engine core's closed loop (sim/closed-loop.ts), so the
 * two compare point by point: TTFT, every gap between tokens, TPOT per
 * request, end-to-end latency, output tokens and the run's duration.
 *
 * As a module: runServedClosedLoop(opts) spawns this file and returns its
 * result. As a script: options in the JSON file named by argv[2]; the result
 * as one JSON line on stdout.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { childEnv } from "../shared/process-env.ts";
import { answerLengths, type ClosedLoopResult, type ClosedLoopSpec } from "../sim/closed-loop.ts";
import { observeStream } from "../sim/stream-probe.ts";

interface ServedClosedLoopOptions extends ClosedLoopSpec {
  /** The engine's API base URL. */
  url: string;
  model: string;
  /** Makes this run's prompts distinct from another run's on the same engine (nothing cached is reused). */
  promptSeed: number;
}

type ServedClosedLoopResult = ClosedLoopResult & { errors: number };

/** Ids of the sim's vocabulary used for prompts: below every model's vocabulary size. */
const VOCAB = 30_000;

export async function runServedClosedLoop(opts: ServedClosedLoopOptions, timeoutMs: number): Promise<ServedClosedLoopResult> {
  const dir = mkdtempSync(join(tmpdir(), "llmgw-served-loop-"));
  try {
    const file = join(dir, "options.json");
    writeFileSync(file, JSON.stringify(opts));
    const proc = Bun.spawn([process.execPath, import.meta.path, file], { env: childEnv(), stdout: "pipe", stderr: "pipe", timeout: Math.ceil(timeoutMs) });
    const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`the closed-loop client exited ${code}${proc.signalCode ? ` (${proc.signalCode})` : ""}: ${err.slice(-2000)}`);
    return JSON.parse(out.trim()) as ServedClosedLoopResult;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Request `i`'s prompt: `n` ids, the first unique to (run, request) so that no two prompts share a block. */
function promptIds(seed: number, i: number, n: number): number[] {
  const ids = new Array<number>(n);
  ids[0] = 1 + ((seed * 7919 + i) % (VOCAB - 1));
  for (let k = 1; k < n; k++) ids[k] = 1 + ((ids[0]! * 31 + k * 17) % (VOCAB - 1));
  return ids;
}

async function run(o: ServedClosedLoopOptions): Promise<ServedClosedLoopResult> {
  const lengths = answerLengths(o);
  const out: ServedClosedLoopResult = { ttftMs: [], itlMs: [], tpotMs: [], e2eMs: [], outputTokens: 0, durationMs: 0, preemptions: 0, errors: 0 };
  let next = 0;
  const t0 = performance.now();
  const one = async (i: number) => {
    const body = JSON.stringify({
      model: o.model,
      prompt: promptIds(o.promptSeed, i, o.inputTokens),
      max_tokens: lengths[i],
      ignore_eos: true,
      stream: true,
    });
    const started = performance.now();
    const gaps: number[] = [];
    try {
      const res = await fetch(`${o.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body });
      if (res.status !== 200 || !res.body) {
        out.errors++;
        await res.arrayBuffer().catch(() => undefined);
        return;
      }
      const obs = await observeStream(res.body, started, gaps);
      const ended = performance.now();
      if (!obs.ok || obs.events !== lengths[i]) {
        out.errors++;
        return;
      }
      out.ttftMs.push(obs.ttftMs);
      out.itlMs.push(...gaps);
      if (obs.events > 1) out.tpotMs.push(gaps.reduce((a, b) => a + b, 0) / (obs.events - 1));
      out.e2eMs.push(ended - started);
      out.outputTokens += obs.events;
    } catch {
      out.errors++;
    }
  };
  const loop = async () => {
    while (next < o.requests) await one(next++);
  };
  await Promise.all(Array.from({ length: Math.min(o.concurrency, o.requests) }, loop));
  out.durationMs = performance.now() - t0;
  return out;
}

if (import.meta.main) {
  const opts = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as ServedClosedLoopOptions;
  console.log(JSON.stringify(await run(opts)));
}
