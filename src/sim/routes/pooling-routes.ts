/**
 * The sim-engine's pooling-model routes with vLLM's request and response
 * shapes (vllm/entrypoints/pooling/{score,classify,pooling}/protocol.py):
 * POST /score and /v1/score (text_1 × text_2 pairs), /rerank, /v1/rerank
 * and /v2/rerank (query against documents, best first, top_n), /pooling
 * (a vector per input) and /classify (class probabilities per input).
 * Scores and vectors are deterministic functions of the text (the sim's
 * embedding vectors, src/sim/openai-response.ts); each request takes what
 * its prefill would on the engine's clock, as embeddings do.
 */
import { embeddingMs } from "../config.ts";
import { parseJsonObject } from "../openai-request.ts";
import { embeddingVector, randomId } from "../openai-response.ts";
import { countTextTokens } from "../tokens.ts";
import { badRequest, SimHttpError } from "../vllm-errors.ts";
import type { SimRouteContext } from "./route-context.ts";

type Obj = Record<string, unknown>;

/** Dimensions of the vectors scores are computed from (any will do: the score is a function of the texts). */
const SCORE_DIM = 64;

function usageInfo(tokens: number): Obj {
  return { prompt_tokens: tokens, total_tokens: tokens, completion_tokens: 0, prompt_tokens_details: null };
}

function modelOf(o: Obj, ctx: SimRouteContext): string {
  const model = o.model ?? ctx.fixed.models[0];
  if (typeof model !== "string") throw badRequest("model: Input should be a valid string", "model");
  if (!ctx.limits.models.includes(model)) throw new SimHttpError(404, "NotFoundError", `The model \`${model}\` does not exist.`, "model");
  return model;
}

function texts(v: unknown, field: string): string[] {
  if (typeof v === "string") return [v];
  if (Array.isArray(v) && v.length > 0 && v.every((s) => typeof s === "string")) return v as string[];
  throw badRequest(`${field}: expected a string or a non-empty list of strings`, field);
}

/** A relevance in (0, 1): the cosine of the two texts' vectors, mapped from [-1, 1]. */
function relevance(a: string, b: string): number {
  const va = embeddingVector(a, SCORE_DIM);
  const vb = embeddingVector(b, SCORE_DIM);
  let dot = 0;
  for (let i = 0; i < SCORE_DIM; i++) dot += va[i]! * vb[i]!;
  return (dot + 1) / 2;
}

function checkLength(tokens: number, ctx: SimRouteContext): void {
  if (tokens > ctx.limits.maxModelLen) {
    throw badRequest(
      `This model's maximum context length is ${ctx.limits.maxModelLen} tokens. However, you requested ${tokens} tokens in the input. Please reduce the length of the input.`,
    );
  }
}

/** The prefill time of `tokens` on the engine's clock, counted as prompt tokens. */
async function prefill(ctx: SimRouteContext, tokens: number): Promise<void> {
  ctx.engine.stats.promptTokens += tokens;
  await Bun.sleep(embeddingMs(ctx.live, ctx.fixed, tokens) / (ctx.fixed.timeScale ?? 1));
}

/** POST /score: text_1 against every text_2 (or pairwise when both are lists of the same length). */
export async function scoreRoute(ctx: SimRouteContext, req: Request): Promise<Response> {
  const o = parseJsonObject(await req.text());
  const model = modelOf(o, ctx);
  const left = texts(o.text_1, "text_1");
  const right = texts(o.text_2, "text_2");
  if (left.length > 1 && left.length !== right.length)
    throw badRequest("text_1 and text_2 lists must have the same length (or text_1 a single text)", "text_1");
  const pairs = right.map((r, i) => [left.length === 1 ? left[0]! : left[i]!, r] as const);
  let tokens = 0;
  for (const [a, b] of pairs) {
    const t = countTextTokens(a) + countTextTokens(b);
    checkLength(t, ctx);
    tokens += t;
  }
  await prefill(ctx, tokens);
  const data = pairs.map(([a, b], index) => ({ index, object: "score", score: relevance(a, b) }));
  return Response.json({ id: randomId("score-"), object: "list", created: Math.floor(Date.now() / 1000), model, data, usage: usageInfo(tokens) });
}

/** POST /rerank, /v1/rerank, /v2/rerank (Jina's and Cohere's shape): documents by relevance to the query, best first. */
export async function rerankRoute(ctx: SimRouteContext, req: Request): Promise<Response> {
  const o = parseJsonObject(await req.text());
  const model = modelOf(o, ctx);
  if (typeof o.query !== "string") throw badRequest("query: Input should be a valid string", "query");
  const query = o.query;
  const docs = texts(o.documents, "documents");
  const topN = o.top_n === undefined || o.top_n === null ? 0 : o.top_n;
  if (typeof topN !== "number" || !Number.isInteger(topN) || topN < 0) throw badRequest("top_n: Input should be a non-negative integer", "top_n");
  let tokens = 0;
  for (const d of docs) {
    const t = countTextTokens(query) + countTextTokens(d);
    checkLength(t, ctx);
    tokens += t;
  }
  await prefill(ctx, tokens);
  const results = docs
    .map((text, index) => ({ index, document: { text }, relevance_score: relevance(query, text) }))
    .sort((a, b) => b.relevance_score - a.relevance_score);
  return Response.json({ id: randomId("rerank-"), model, usage: { total_tokens: tokens }, results: topN > 0 ? results.slice(0, topN) : results });
}

/** A pooling request's inputs: a string or a list of strings (token-id inputs count one token per id). */
function poolingInputs(o: Obj): { text: string; tokens: number }[] {
  const input = o.input;
  const ids = (v: unknown): v is number[] => Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === "number" && Number.isInteger(t));
  if (typeof input === "string") return [{ text: input, tokens: countTextTokens(input) }];
  if (ids(input)) return [{ text: input.join(","), tokens: input.length }];
  if (Array.isArray(input) && input.length > 0 && input.every((s) => typeof s === "string"))
    return (input as string[]).map((s) => ({ text: s, tokens: countTextTokens(s) }));
  if (Array.isArray(input) && input.length > 0 && input.every(ids)) return (input as number[][]).map((v) => ({ text: v.join(","), tokens: v.length }));
  throw badRequest("input: expected a string, a list of strings, a list of token ids or a list of such lists", "input");
}

/** POST /pooling: the pooled hidden state of each input (the sim's vector). */
export async function poolingRoute(ctx: SimRouteContext, req: Request): Promise<Response> {
  const o = parseJsonObject(await req.text());
  const model = modelOf(o, ctx);
  const inputs = poolingInputs(o);
  for (const it of inputs) checkLength(it.tokens, ctx);
  const tokens = inputs.reduce((a, b) => a + b.tokens, 0);
  await prefill(ctx, tokens);
  const data = inputs.map((it, index) => ({ index, object: "pooling", data: embeddingVector(it.text, ctx.fixed.embeddingDim) }));
  return Response.json({ id: randomId("pool-"), object: "list", created: Math.floor(Date.now() / 1000), model, data, usage: usageInfo(tokens) });
}

/** POST /classify: two classes, their probabilities a function of the text. */
export async function classifyRoute(ctx: SimRouteContext, req: Request): Promise<Response> {
  const o = parseJsonObject(await req.text());
  const model = modelOf(o, ctx);
  const inputs = poolingInputs(o);
  for (const it of inputs) checkLength(it.tokens, ctx);
  const tokens = inputs.reduce((a, b) => a + b.tokens, 0);
  await prefill(ctx, tokens);
  const data = inputs.map((it, index) => {
    const p = relevance(it.text, "positive");
    const probs = [1 - p, p];
    return { index, label: p >= 0.5 ? "LABEL_1" : "LABEL_0", probs, num_classes: 2 };
  });
  return Response.json({ id: randomId("classify-"), object: "list", created: Math.floor(Date.now() / 1000), model, data, usage: usageInfo(tokens) });
}
