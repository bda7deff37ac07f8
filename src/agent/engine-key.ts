/** A replica's API key (spec `apiKeyEnv`: a variable of the agent's environment): given to the engine as VLLM_API_KEY, sent on the agent's own calls to it. */
import type { ReplicaSpec } from "./replica-spec.ts";

type Env = Readonly<Record<string, string | undefined>>;

function keyOf(spec: Pick<ReplicaSpec, "apiKeyEnv">, env: Env): string | undefined {
  return spec.apiKeyEnv === undefined ? undefined : env[spec.apiKeyEnv]?.trim() || undefined;
}

/**
 * The engine's environment for its key. vLLM reads VLLM_API_KEY when no
 * --api-key is given (and the sim-engine does the same): unlike a flag, the
 * key stays out of the process list, the agent's pid files and its log line
 * of the launched command.
 */
export function engineKeyEnv(spec: Pick<ReplicaSpec, "apiKeyEnv">, env: Env = process.env): Record<string, string> {
  const key = keyOf(spec, env);
  return key === undefined ? {} : { VLLM_API_KEY: key };
}

/** Headers for the agent's own requests to the engine (readiness probes, LoRA loads). */
export function engineAuthHeaders(spec: Pick<ReplicaSpec, "apiKeyEnv">, env: Env = process.env): Record<string, string> {
  const key = keyOf(spec, env);
  return key === undefined ? {} : { authorization: `Bearer ${key}` };
}
