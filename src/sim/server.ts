/**
 * The sim-engine's HTTP shell: one Bun.serve with a plain fetch handler for
 * the vLLM-compatible API, /metrics, /health and the /sim control API, and
 * an optional second listener with DCGM-exporter metrics. All logic lives in
 * the engine, request/response and metrics modules; this file wires them.
 */
import { hostname as osHostname } from "node:os";
import { KvEventPublisher } from "../engines/kv-events/publisher.ts";
import { logger } from "../shared/logger.ts";
import { randomSeed, seededUnit } from "../shared/seeded.ts";
import type { Closable } from "./answer-stream.ts";
import { apiKeyRefusal } from "./api-key-guard.ts";
import { applyConfigPatch, embeddingMs, liveConfigView, type SimLiveConfig, type SimStaticConfig, simConfigPatchSchema } from "./config.ts";
import { gpuSpec, SimGpus } from "./dcgm-text.ts";
import { Engine } from "./engine.ts";
import { renderEngineMetrics } from "./engine-metrics-text.ts";
import { chooseFault, FAULT_HEADER } from "./faults.ts";
import { generationSequences, requestLimits } from "./generation-sequences.ts";
import { EngineLora } from "./lora/engine-lora.ts";
import { loraRoute } from "./lora/lora-routes.ts";
import {
  parseDetokenizeRequest,
  parseEmbeddingRequest,
  parseGenerationRequest,
  parseJsonObject,
  parseTokenizeRequest,
  type RequestLimits,
} from "./openai-request.ts";
import { embeddingResponse, modelsResponse, randomId } from "./openai-response.ts";
import { extraRoute } from "./routes/extra-routes.ts";
import type { SimRouteContext } from "./routes/route-context.ts";
import { JsonSink, SseSink } from "./sinks.ts";
import { tokenText } from "./tokens.ts";
import { badRequest, fastapiMethodNotAllowed, fastapiNotFound, SimHttpError, vllmErrorResponse } from "./vllm-errors.ts";

/**
 * The vLLM release whose behaviour the sim follows (async scheduling on,
 * KV events with their cache group, blocks freed tail-first): the newest one
 * a sweep it is fitted to measured.
 */
const SIM_VLLM_VERSION = "0.23.0+llmgw-sim";

/** Bun's maximum; streams additionally get server.timeout(req, 0) (Bun's 10 s idle timeout also runs while a response streams, and would cut a silent one). */
const IDLE_TIMEOUT_S = 255;
const PROM_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";
const SSE_HEADERS = { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" };

type BunServer = ReturnType<typeof Bun.serve>;

export class SimServer {
  readonly engine: Engine;
  private readonly gpus: SimGpus | undefined;
  private readonly lora: EngineLora | undefined;
  private readonly active = new Set<Closable>();
  private readonly owner = { closed: (s: Closable) => void this.active.delete(s) };
  private readonly limits: RequestLimits;
  private readonly startedAt = Date.now();
  private readonly createdS = Math.floor(Date.now() / 1000);
  private requestsTotal = 0;
  private api: BunServer | undefined;
  private dcgm: BunServer | undefined;
  private kvPublisher: KvEventPublisher | undefined;
  /** What the added routes (routes/) see of this server. */
  private readonly routes: SimRouteContext;

  constructor(
    readonly fixed: SimStaticConfig,
    readonly live: SimLiveConfig,
  ) {
    this.engine = new Engine(fixed, live, undefined, seededUnit(fixed.seed ?? randomSeed()));
    if (fixed.lora) this.lora = this.engine.core.lora = new EngineLora(fixed.lora, fixed.models, () => this.engine.runningCount + this.engine.waitingCount > 0);
    this.limits = requestLimits(fixed, this.lora);
    this.routes = {
      engine: this.engine,
      fixed,
      live,
      limits: this.limits,
      owner: this.owner,
      track: (a) => void this.active.add(a),
      notReady: () => this.notReady(),
      counted: () => void this.requestsTotal++,
      adapter: (model) => this.lora?.resolve(model),
    };
    if (fixed.gpus > 0)
      this.gpus = new SimGpus(
        gpuSpec(fixed.gpuModel),
        fixed.gpus,
        osHostname(),
        `${osHostname()}/${process.pid}`,
        performance.now(),
        fixed.dcgmModelLabel,
        fixed.reservedMiB,
      );
  }

  /** What the engine holds on each of its GPUs, MiB (undefined: it simulates none). */
  heldMiBPerGpu(): number | undefined {
    return this.gpus?.usedMiB;
  }

  /** The publisher's endpoints as a subscriber reaches them (a wildcard bind is reached over loopback). */
  listen(host: string, port: number, dcgmPort: number | undefined): { api: string; dcgm?: string; kvEvents?: string; kvReplay?: string } {
    // development: false — no HTML error pages, and a deliberately errored stream (cut:N) is not printed as a crash.
    // reusePort: false — Bun turns SO_REUSEPORT on with development: false, and a second sim-engine on a held
    // port would then share it silently (a gateway polling the port flips between their model lists).
    this.api = Bun.serve({
      hostname: host,
      port,
      idleTimeout: IDLE_TIMEOUT_S,
      development: false,
      reusePort: false,
      fetch: (req, server) => this.handle(req, server),
    });
    const out: { api: string; dcgm?: string; kvEvents?: string; kvReplay?: string } = { api: `http://${host}:${this.api.port}` };
    const kv = this.fixed.kvEvents;
    if (kv) {
      const publisher = new KvEventPublisher({
        endpoint: kv.endpoint,
        connect: kv.connect,
        replayEndpoint: kv.replayEndpoint,
        topic: kv.topic,
        bufferSteps: kv.bufferSteps,
        hwmMessages: kv.hwm,
      });
      this.kvPublisher = publisher;
      this.engine.onKvEvents = (events) => publisher.publish(events);
      out.kvEvents = reachable(publisher.endpoint);
      if (publisher.replayEndpoint !== undefined) out.kvReplay = reachable(publisher.replayEndpoint);
    }
    if (this.gpus && dcgmPort !== undefined) {
      this.dcgm = Bun.serve({ hostname: host, port: dcgmPort, development: false, reusePort: false, fetch: (req) => this.handleDcgm(req) });
      out.dcgm = `http://${host}:${this.dcgm.port}`;
    }
    return out;
  }

  /** Stop listening, end every open stream and pending response, stop the engine loop. */
  async close(): Promise<void> {
    const stopping = [this.api?.stop(false), this.dcgm?.stop(true)];
    for (const s of [...this.active]) s.shutdown();
    this.engine.stop();
    this.kvPublisher?.close();
    await Promise.race([Promise.all(stopping), Bun.sleep(2_000)]);
    await this.api?.stop(true);
  }

  private get loading(): boolean {
    return Date.now() - this.startedAt < this.fixed.startupMs;
  }

  private async handle(req: Request, server: BunServer): Promise<Response> {
    const path = new URL(req.url).pathname;
    // vLLM binds its port before it builds the engine and serves HTTP only once
    // the weights are loaded (api_server.run_server, vllm-project/vllm#8204):
    // a request made while loading is accepted and answered when ready.
    if (this.fixed.startupAnswers !== "split" && this.loading && !path.startsWith("/sim/")) {
      server.timeout(req, 0);
      await Bun.sleep(Math.max(0, this.startedAt + this.fixed.startupMs - Date.now()));
    }
    const refused = apiKeyRefusal(req, path, this.fixed.apiKey);
    if (refused) return refused;
    try {
      const adapterRoute = loraRoute(this.lora, path, req);
      if (adapterRoute) return await adapterRoute;
      switch (path) {
        case "/v1/chat/completions":
          return req.method === "POST" ? await this.generate("chat", req, server) : fastapiMethodNotAllowed("POST");
        case "/v1/completions":
          return req.method === "POST" ? await this.generate("completion", req, server) : fastapiMethodNotAllowed("POST");
        case "/v1/embeddings":
          return req.method === "POST" ? await this.embeddings(req) : fastapiMethodNotAllowed("POST");
        case "/v1/models":
          return this.notReady() ?? Response.json(modelsResponse(this.fixed.models, this.createdS, this.fixed.maxModelLen, this.lora?.cards()));
        case "/health":
          return new Response(null, { status: this.live.dead ? 503 : 200 });
        case "/metrics":
          return new Response(
            renderEngineMetrics(this.fixed.metricsFlavor, this.engine, this.fixed, performance.now()) +
              (this.fixed.metricsFlavor !== "sglang" ? (this.lora?.metric.text() ?? "") : ""),
            { headers: { "content-type": PROM_CONTENT_TYPE } },
          );
        case "/tokenize":
          return req.method === "POST" ? (this.notReady() ?? this.tokenize(await req.text())) : fastapiMethodNotAllowed("POST");
        case "/detokenize":
          return req.method === "POST"
            ? (this.notReady() ?? Response.json({ prompt: parseDetokenizeRequest(await req.text(), this.limits) }))
            : fastapiMethodNotAllowed("POST");
        case "/reset_prefix_cache":
          return req.method === "POST" ? this.resetPrefixCache() : fastapiMethodNotAllowed("POST");
        case "/version":
          return Response.json({ version: SIM_VLLM_VERSION });
        case "/sim/state":
          return Response.json(this.state());
        case "/sim/config":
          return req.method === "POST" ? await this.configure(req) : fastapiMethodNotAllowed("POST");
        default:
          return (await extraRoute(this.routes, path, req, server)) ?? fastapiNotFound();
      }
    } catch (err) {
      if (err instanceof SimHttpError) return vllmErrorResponse(err);
      const message = err instanceof Error ? err.message : String(err);
      return vllmErrorResponse(new SimHttpError(500, "InternalServerError", message));
    }
  }

  /** 503 when marked dead, or while "loading weights" with --startup-answers split. */
  private notReady(): Response | undefined {
    if (this.live.dead) return vllmErrorResponse(new SimHttpError(503, "ServiceUnavailableError", "The engine is dead (sim-engine: dead=true)."));
    if (this.loading) return vllmErrorResponse(new SimHttpError(503, "ServiceUnavailableError", "The model is still loading (sim-engine --startup-ms)."));
    return undefined;
  }

  private async generate(kind: "chat" | "completion", req: Request, server: BunServer): Promise<Response> {
    this.requestsTotal++;
    const blocked = this.notReady();
    if (blocked) return blocked;
    const parsed = parseGenerationRequest(kind, await req.text(), this.limits);
    const fault = chooseFault(req.headers.get(FAULT_HEADER), this.live.faultRate, this.live.faultTypes);
    if (fault === "bad-header") throw badRequest(`${FAULT_HEADER}: unknown fault type`, FAULT_HEADER);
    switch (fault?.kind) {
      case "500":
        return vllmErrorResponse(new SimHttpError(500, "InternalServerError", "Injected fault 500 (sim-engine)."));
      case "429":
        return vllmErrorResponse(new SimHttpError(429, "RateLimitError", "Injected fault 429 (sim-engine)."), { "retry-after": "1" });
      case "503":
        return vllmErrorResponse(new SimHttpError(503, "ServiceUnavailableError", "Injected fault 503 (sim-engine)."));
      default:
        break;
    }
    server.timeout(req, 0);
    let stallAfter = -1;
    let cutAfter = -1;
    let intervalMs = 0;
    if (fault?.kind === "no-headers" || fault?.kind === "no-first-token") stallAfter = 0;
    else if (fault?.kind === "stall") stallAfter = fault.tokens;
    else if (fault?.kind === "cut") cutAfter = fault.tokens;
    else if (fault?.kind === "slow") intervalMs = fault.intervalMs;

    const head = {
      kind,
      id: randomId(kind === "chat" ? "chatcmpl-" : "cmpl-"),
      created: Math.floor(Date.now() / 1000),
      model: parsed.model,
      promptTokens: parsed.prompts.reduce((a, p) => a + p.count, 0),
      promptTokensDetails: this.fixed.enablePromptTokensDetails === true,
    };
    const streaming = parsed.stream && fault?.kind !== "no-headers";
    const answer = streaming ? new SseSink(head, parsed.choices, parsed.includeUsage, this.owner) : new JsonSink(head, parsed.choices, this.owner);
    this.active.add(answer);
    const seqs = generationSequences(parsed, this.lora, this.fixed.blockSize, { stallAfter, cutAfter, intervalMs }).map((seq, k) =>
      this.engine.submit({ ...seq, sink: answer.sink(k) }),
    );
    const onGone = () => {
      for (const seq of seqs) this.engine.abort(seq, true);
      answer.shutdown();
    };
    if (answer instanceof SseSink) answer.onCancel = onGone;
    req.signal.addEventListener("abort", onGone, { once: true });
    if (answer instanceof SseSink) return new Response(answer.stream, { headers: SSE_HEADERS });
    return await answer.response;
  }

  /** vLLM's TokenizeResponse: the ids a generation request with the same prompt computes. */
  private tokenize(body: string): Response {
    const { prompt, tokenStrs } = parseTokenizeRequest(body, this.limits);
    const tokens = Array.from(prompt.ids);
    return Response.json({
      count: prompt.count,
      max_model_len: this.fixed.maxModelLen,
      tokens,
      token_strs: tokenStrs ? tokens.map((t) => tokenText(t) ?? "") : null,
    });
  }

  /** vLLM answers 200 whether or not the reset happened (it logs the refusal while requests hold blocks). */
  private resetPrefixCache(): Response {
    if (!this.engine.resetPrefixCache()) logger().warn({ used_blocks: this.engine.kv.used }, "prefix cache not reset: requests still hold KV blocks");
    return new Response(null, { status: 200 });
  }

  private async embeddings(req: Request): Promise<Response> {
    const blocked = this.notReady();
    if (blocked) return blocked;
    const parsed = parseEmbeddingRequest(await req.text(), this.limits);
    const tokens = parsed.inputs.reduce((a, b) => a + b.tokens, 0);
    this.engine.stats.promptTokens += tokens;
    // Embeddings do not go through the generation steps here: they take what their prefill would, on the engine's clock.
    await Bun.sleep(embeddingMs(this.live, this.fixed, tokens) / (this.fixed.timeScale ?? 1));
    return Response.json(embeddingResponse(parsed.model, Math.floor(Date.now() / 1000), parsed.inputs, this.fixed.embeddingDim));
  }

  private async configure(req: Request): Promise<Response> {
    const body = parseJsonObject(await req.text());
    const r = simConfigPatchSchema.safeParse(body);
    if (!r.success) {
      const msg = r.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
      throw badRequest(msg);
    }
    try {
      applyConfigPatch(this.live, r.data);
    } catch (err) {
      throw badRequest(err instanceof Error ? err.message : String(err), "gpus");
    }
    return Response.json({ config: liveConfigView(this.live) });
  }

  state(): Record<string, unknown> {
    const e = this.engine;
    const cpu = process.cpuUsage();
    return {
      models: this.fixed.models,
      running: e.runningCount,
      waiting: e.waitingCount,
      kv_blocks_used: e.kv.used,
      kv_blocks_total: e.kv.numBlocks,
      kv_cache_usage: e.kv.usage,
      disconnects: e.stats.disconnects,
      requests_total: this.requestsTotal,
      prompt_tokens_total: e.stats.promptTokens,
      generation_tokens_total: e.stats.generationTokens,
      prefix_cache: {
        queries: e.stats.prefixQueries,
        hits: e.stats.prefixHits,
        preempted: { ...e.stats.preemptedPrefix },
        cached_blocks: e.kv.cached,
      },
      kv_events: this.kvPublisher ? this.kvPublisher.stats() : null,
      preemptions: e.stats.preemptions,
      open_responses: this.active.size,
      step_ms: e.stepMs(),
      clock: e.clock.view(),
      gpu_utilization: e.utilization(),
      dead: this.live.dead,
      loading: this.loading,
      lora: this.lora?.state() ?? null,
      config: {
        ...liveConfigView(this.live),
        profile: this.fixed.profile ?? null,
        seed: this.fixed.seed ?? null,
        kv_cache_dtype: this.fixed.kvCacheDtype ?? "auto",
        time_scale: this.fixed.timeScale ?? 1,
        max_num_seqs: this.fixed.maxNumSeqs,
        max_num_batched_tokens: this.fixed.maxNumBatchedTokens ?? null,
        num_gpu_blocks: this.fixed.numGpuBlocks,
        block_size: this.fixed.blockSize,
        max_model_len: this.fixed.maxModelLen,
        output_len: this.fixed.outputLen,
        metrics_flavor: this.fixed.metricsFlavor,
        startup_ms: this.fixed.startupMs,
        gpu_count: this.fixed.gpus,
        gpu_model: this.fixed.gpuModel,
      },
      cpu: { user_us: cpu.user, system_us: cpu.system },
    };
  }

  private handleDcgm(req: Request): Response {
    const path = new URL(req.url).pathname;
    if (path !== "/metrics" || !this.gpus) return new Response("404 page not found\n", { status: 404 });
    // dcgm-exporter answers 503 while it cannot reach the DCGM host engine.
    if (this.live.dcgmDead) return new Response("DCGM host engine not available\n", { status: 503 });
    const shares = this.engine.lastStepShares();
    const load = { utilization: this.engine.utilization(), computeShare: shares?.compute, memoryShare: shares?.memory };
    return new Response(this.gpus.render(load, this.live.gpus, performance.now()), { headers: { "content-type": PROM_CONTENT_TYPE } });
  }
}

/** A wildcard bind (tcp://0.0.0.0:P, tcp://[::]:P) as a local subscriber dials it. */
function reachable(endpoint: string): string {
  return endpoint.replace("tcp://0.0.0.0:", "tcp://127.0.0.1:").replace("tcp://[::]:", "tcp://[::1]:");
}
