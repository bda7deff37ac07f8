/**
 * vLLM's runtime adapter routes, `POST /v1/load_lora_adapter` and
 * `POST /v1/unload_lora_adapter`: registered only when
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING is set (otherwise FastAPI's 404), JSON
 * bodies `{"lora_name","lora_path","load_inplace"}` and `{"lora_name"}`,
 * a plain-text "Success: …" on 200, and vLLM's error shape otherwise.
 */
import { fastapiMethodNotAllowed, SimHttpError } from "../vllm-errors.ts";
import type { EngineLora } from "./engine-lora.ts";

const LOAD_LORA_PATH = "/v1/load_lora_adapter";
const UNLOAD_LORA_PATH = "/v1/unload_lora_adapter";

type Body = Record<string, unknown>;

/** vLLM's validate_json_request dependency, then the body as an object (400 otherwise, as vLLM's validation handler answers). */
async function jsonBody(req: Request): Promise<Body | Response> {
  const type = req.headers.get("content-type");
  if (type !== null && !type.toLowerCase().startsWith("application/json")) {
    return Response.json({ detail: "Unsupported Media Type: Only 'application/json' is allowed" }, { status: 415 });
  }
  let v: unknown;
  try {
    v = JSON.parse(await req.text());
  } catch (err) {
    throw new SimHttpError(400, "BadRequestError", `JSON decode error: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (typeof v !== "object" || v === null || Array.isArray(v)) throw new SimHttpError(400, "BadRequestError", "Input should be a valid dictionary");
  return v as Body;
}

function optString(b: Body, key: string): string {
  const v = b[key];
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") throw new SimHttpError(400, "BadRequestError", `${key}: Input should be a valid string`);
  return v;
}

function requiredString(b: Body, key: string): string {
  if (b[key] === undefined) throw new SimHttpError(400, "BadRequestError", `${key}: Field required`);
  return optString(b, key);
}

/** The response for a LoRA route, or undefined when `path` is not one (or runtime updates are off: FastAPI has no such route then). */
export function loraRoute(lora: EngineLora | undefined, path: string, req: Request): Promise<Response> | undefined {
  if (!lora?.settings.runtimeUpdates) return undefined;
  if (path !== LOAD_LORA_PATH && path !== UNLOAD_LORA_PATH) return undefined;
  if (req.method !== "POST") return Promise.resolve(fastapiMethodNotAllowed("POST"));
  return (async () => {
    const body = await jsonBody(req);
    if (body instanceof Response) return body;
    if (path === LOAD_LORA_PATH) {
      const name = requiredString(body, "lora_name");
      const lpath = requiredString(body, "lora_path");
      const inplace = body.load_inplace;
      if (inplace !== undefined && typeof inplace !== "boolean")
        throw new SimHttpError(400, "BadRequestError", "load_inplace: Input should be a valid boolean");
      lora.load(name, lpath, inplace === true);
      return new Response(`Success: LoRA adapter '${name}' added successfully.`);
    }
    const name = optString(body, "lora_name");
    lora.unload(name);
    return new Response(`Success: LoRA adapter '${name}' removed successfully.`);
  })();
}
