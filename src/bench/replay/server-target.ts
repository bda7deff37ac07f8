/**
 * `bench replay --base-url`: the OpenAI-compatible server a replay measures
 * instead of a fleet it starts — its base URL, the key it wants, and the
 * model to name (the first /v1/models lists unless --model says, as
 * `vllm bench serve` does: get_first_model_from_server).
 */
import { UsageError } from "../../shared/flags.ts";

/** The environment variable an API key may come from instead of --api-key (a flag is visible in `ps`). */
export const BENCH_API_KEY_ENV = "LLMGW_BENCH_API_KEY";
const MODELS_TIMEOUT_MS = 10_000;

/** The server's root: scheme, host, port and any path prefix, without a trailing slash or `/v1` (an OpenAI client's base URL ends in it). */
export function serverRoot(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--base-url: expected an http(s) URL such as http://127.0.0.1:8000, got '${raw}'`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--base-url: expected http:// or https://, got '${url.protocol}'`);
  if (url.search !== "" || url.hash !== "") throw new UsageError("--base-url: expected no query or fragment");
  const path = url.pathname.replace(/\/+$/, "").replace(/\/v1$/, "");
  return `${url.origin}${path}`;
}

/** The header a key travels in: `Authorization: Bearer KEY`, what vLLM's --api-key and OpenAI's API check. */
export function authHeaders(apiKey: string | undefined): Record<string, string> {
  return apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
}

/** The first model the server lists; a clear error when it cannot be read (unreachable, refused, empty). */
export async function firstServedModel(root: string, headers: Record<string, string>): Promise<string> {
  const url = `${root}/v1/models`;
  let res: Response;
  try {
    res = await fetch(url, { headers, signal: AbortSignal.timeout(MODELS_TIMEOUT_MS) });
  } catch (err) {
    throw new Error(`--base-url: GET ${url} failed (${err instanceof Error ? err.message : String(err)}); is the server up? Or name the model with --model`);
  }
  const text = await res.text().catch(() => "");
  if (res.status === 401 || res.status === 403)
    throw new UsageError(`--base-url: GET ${url} answered ${res.status} ${text.slice(0, 200)}: give the server's key with --api-key or ${BENCH_API_KEY_ENV}`);
  if (res.status !== 200) throw new Error(`--base-url: GET ${url} answered ${res.status} ${text.slice(0, 200)}; name the model with --model`);
  let id: unknown;
  try {
    id = (JSON.parse(text) as { data?: { id?: unknown }[] }).data?.[0]?.id;
  } catch {
    id = undefined;
  }
  if (typeof id !== "string" || id === "") throw new Error(`--base-url: GET ${url} lists no model; name one with --model`);
  return id;
}
