/**
 * LoRA adapters on a replica the agent runs: loaded and unloaded through
 * the engine's own runtime routes (vLLM's POST /v1/load_lora_adapter and
 * /v1/unload_lora_adapter, which exist because the agent started the
 * engine with VLLM_ALLOW_RUNTIME_LORA_UPDATING), so the control plane needs
 * no address of the engine and no route to it. Idempotent: loading an
 * adapter the engine has is "unchanged", unloading one it lacks "absent".
 */
import { z } from "zod";
import { errorBodyMessage, LlmgwError } from "../shared/errors.ts";
import { modelNameProblem, quotedName } from "../shared/model-name.ts";
import { engineAuthHeaders } from "./engine-key.ts";
import type { DesiredReplica } from "./supervisor.ts";

const adapterLoadSchema = z.strictObject({ path: z.string().min(1).max(4096) });

/** How long the engine may take to load an adapter (a disk read; remote paths take longer). */
const ADAPTER_CALL_TIMEOUT_MS = 60_000;

export type AdapterOutcome = "loaded" | "unchanged" | "unloaded" | "absent";

type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

/** An adapter's name becomes an engine's model name: the gateway's rule for names, without whitespace and no leading '-' (the fleet's rule for names). */
function checkName(name: string): void {
  const problem = modelNameProblem(name) ?? (/\s/.test(name) ? "contains whitespace" : name.startsWith("-") ? "starts with '-'" : undefined);
  if (problem !== undefined) throw new LlmgwError("VALIDATION_FAILED", `adapter name ${quotedName(name)} ${problem}`, { param: "name" });
}

function withLora(replica: DesiredReplica | undefined, id: string): DesiredReplica {
  if (!replica) throw new LlmgwError("NOT_FOUND", `no replica '${id}' on this node`);
  if (!replica.spec.lora) throw new LlmgwError("CONFLICT", `replica '${id}' was not started with lora: it takes no adapters`);
  return replica;
}

async function engineCall(fetchFn: FetchFn, replica: DesiredReplica, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const url = new URL(path, replica.probeUrl).toString();
  try {
    const res = await fetchFn(url, {
      method: "POST",
      headers: { ...engineAuthHeaders(replica.spec), "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(ADAPTER_CALL_TIMEOUT_MS),
    });
    return { status: res.status, text: await res.text() };
  } catch (err) {
    throw new LlmgwError("UPSTREAM_CONNECT_FAILED", `replica '${replica.id}': POST ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** What the engine's answer to a load or unload means; throws for a refusal or a failure. */
function outcomeOf(replica: DesiredReplica, op: "load" | "unload", name: string, r: { status: number; text: string }): AdapterOutcome {
  const message = errorBodyMessage(r.text);
  if (r.status === 200) return op === "load" ? "loaded" : "unloaded";
  if (op === "load" && r.status === 400 && /has already been loaded/.test(message)) return "unchanged";
  if (op === "unload" && r.status === 404 && /cannot be found/.test(message)) return "absent";
  // FastAPI's own 404: the engine has no such route (runtime LoRA updates off).
  if (r.status === 404 && /"detail"/.test(r.text))
    throw new LlmgwError("UPSTREAM_REJECTED", `replica '${replica.id}' does not take adapters at run time (its engine has no ${op} route)`);
  if (r.status >= 400 && r.status < 500) throw new LlmgwError("UPSTREAM_REJECTED", `replica '${replica.id}' refused to ${op} adapter '${name}': ${message}`);
  throw new LlmgwError("UPSTREAM_ERROR", `replica '${replica.id}' failed to ${op} adapter '${name}': HTTP ${r.status}: ${message}`);
}

export async function loadAdapter(
  replica: DesiredReplica | undefined,
  id: string,
  name: string,
  body: unknown,
  fetchFn: FetchFn = (u, i) => fetch(u, i),
): Promise<AdapterOutcome> {
  checkName(name);
  const parsed = adapterLoadSchema.safeParse(body);
  if (!parsed.success)
    throw new LlmgwError(
      "VALIDATION_FAILED",
      `adapter: ${parsed.error.issues[0]?.path.join(".") || "(body)"}: ${parsed.error.issues[0]?.message ?? "invalid"}`,
      { param: "path" },
    );
  const r = withLora(replica, id);
  return outcomeOf(r, "load", name, await engineCall(fetchFn, r, "/v1/load_lora_adapter", { lora_name: name, lora_path: parsed.data.path }));
}

export async function unloadAdapter(
  replica: DesiredReplica | undefined,
  id: string,
  name: string,
  fetchFn: FetchFn = (u, i) => fetch(u, i),
): Promise<AdapterOutcome> {
  checkName(name);
  const r = withLora(replica, id);
  return outcomeOf(r, "unload", name, await engineCall(fetchFn, r, "/v1/unload_lora_adapter", { lora_name: name }));
}
