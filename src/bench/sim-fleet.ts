/**
 * Sim-engines behind one llmgw gateway, started for a bench: N engines on
 * port 0 with the bench's flags followed by the user's (the sim-engine's
 * parser keeps the last value of a flag, so a flag the user passes wins),
 * then a gateway over them, ready once it sees every engine ready. Also
 * reads an engine's own counters (vLLM's metric names) after a run.
 *
 * Benches that replay traffic onto sim-engines (`bench replay`, and any
 * that compares gateways over the same engines) start them here, so the
 * engines' flags pass through one place.
 */
import { parsePrometheusText, sumSamples } from "../engines/prom-text.ts";
import { UsageError } from "../shared/flags.ts";
import { type LlmgwChild, spawnLlmgw, writeGatewayConfig } from "../shared/llmgw-child.ts";

export interface SimEngine {
  /** The gateway's endpoint id for it: sim-1, sim-2 … */
  id: string;
  /** API base URL (also serves /metrics). */
  url: string;
  child: LlmgwChild;
}

interface BenchGateway {
  child: LlmgwChild;
  /** OpenAI API base URL. */
  api: string;
  admin: string;
}

interface SimFleet {
  engines: SimEngine[];
  gateway: BenchGateway;
  stop(): Promise<void>;
}

interface SimFleetOptions {
  engines: number;
  model: string;
  /** sim-engine flags for every engine, after --port and --model (last one wins). */
  engineArgs: readonly string[];
  /** Gateway config; its listeners and endpoints are set here. */
  gatewayConfig?: Record<string, unknown>;
}

/**
 * Split a flag string the way a shell would for plain words and quotes
 * ("--profile 'h100 sxm'" → ["--profile", "h100 sxm"]); no expansion.
 */
export function splitArgs(text: string): string[] {
  const out: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  for (const ch of text) {
    if (quote !== undefined) {
      if (ch === quote) quote = undefined;
      else word += ch;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
      word ??= "";
    } else if (/\s/.test(ch)) {
      if (word !== undefined) out.push(word);
      word = undefined;
    } else word = (word ?? "") + ch;
  }
  if (quote !== undefined) throw new UsageError(`unbalanced ${quote} in '${text}'`);
  if (word !== undefined) out.push(word);
  return out;
}

export async function startSimEngines(count: number, model: string, args: readonly string[]): Promise<SimEngine[]> {
  const started = await Promise.allSettled(Array.from({ length: count }, () => spawnLlmgw(["sim-engine", "--port", "0", "--model", model, ...args])));
  const children = started.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  const failed = started.find((s) => s.status === "rejected");
  if (failed) {
    await Promise.all(children.map((c) => c.stop()));
    const why = failed.reason instanceof Error ? failed.reason.message : String(failed.reason);
    // Most often a flag the sim-engine refused: say so with its own words.
    const usage = /llmgw sim-engine: ([^\n]+)/.exec(why)?.[1];
    throw usage ? new UsageError(`sim-engine refused its flags (${args.join(" ")}): ${usage}`) : new Error(`a sim-engine did not start: ${why}`);
  }
  return children.map((child, i) => ({ id: `sim-${i + 1}`, url: child.urls.api ?? child.url, child }));
}

async function waitAllReady(admin: string, n: number, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const body = (await (await fetch(`${admin}/admin/v1/endpoints`)).json()) as { endpoints: { ready: boolean }[] };
    if (body.endpoints.filter((e) => e.ready).length >= n) return;
    await Bun.sleep(50);
  }
  throw new Error(`the gateway did not see ${n} ready engines within ${timeoutMs} ms`);
}

/**
 * A gateway over `engines`, ready once it sees them all ready. `endpointExtras`
 * adds keys to an engine's endpoint entry (a bench whose policy needs more
 * than the engine's URL, e.g. an engine's KV-events socket).
 */
export async function startBenchGateway(
  engines: readonly SimEngine[],
  model: string,
  config: Record<string, unknown> = {},
  endpointExtras: (e: SimEngine) => Record<string, unknown> = () => ({}),
): Promise<BenchGateway> {
  const path = writeGatewayConfig({
    ...config,
    listen: "127.0.0.1:0",
    admin_listen: "127.0.0.1:0",
    endpoints: engines.map((e) => ({ ...endpointExtras(e), id: e.id, url: e.url, models: [model] })),
  });
  // The launcher waits for the "listening" lines, which are logged at info.
  let child: LlmgwChild;
  try {
    child = await spawnLlmgw(["serve", "--config", path, "--log-level", "info"], { waitFor: 2 });
  } catch (err) {
    // A config the gateway refuses: its own message names the key and what was expected.
    const why = err instanceof Error ? err.message : String(err);
    const refused = /invalid configuration[^\n]*\n((?: {2}[^\n]*\n?)+)/.exec(why)?.[1];
    throw refused ? new UsageError(`the gateway refused its config: ${refused.trim().replace(/\n\s*/g, "; ")}`) : err;
  }
  const gw = { child, api: child.urls.api!, admin: child.urls.admin! };
  try {
    await waitAllReady(gw.admin, engines.length);
  } catch (err) {
    await child.stop();
    throw err;
  }
  return gw;
}

export async function startSimFleet(o: SimFleetOptions): Promise<SimFleet> {
  const engines = await startSimEngines(o.engines, o.model, o.engineArgs);
  let gateway: BenchGateway;
  try {
    gateway = await startBenchGateway(engines, o.model, o.gatewayConfig);
  } catch (err) {
    await Promise.all(engines.map((e) => e.child.stop()));
    throw err;
  }
  return {
    engines,
    gateway,
    async stop() {
      await gateway.child.stop();
      await Promise.all(engines.map((e) => e.child.stop()));
    },
  };
}

/** An engine's own cumulative counters (vLLM's names); a counter it does not export is undefined, never 0. */
interface EngineCounters {
  requests?: number;
  promptTokens?: number;
  generationTokens?: number;
  prefixCacheQueries?: number;
  prefixCacheHits?: number;
  preemptions?: number;
}

export async function engineCounters(url: string): Promise<EngineCounters> {
  const { samples } = parsePrometheusText(await (await fetch(`${url}/metrics`)).text());
  const pick = (...names: string[]) => names.map((n) => sumSamples(samples, n)).find((v) => v !== undefined);
  return {
    requests: pick("vllm:request_success_total"),
    promptTokens: pick("vllm:prompt_tokens_total"),
    generationTokens: pick("vllm:generation_tokens_total"),
    prefixCacheQueries: pick("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
    prefixCacheHits: pick("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
    preemptions: pick("vllm:num_preemptions_total"),
  };
}
