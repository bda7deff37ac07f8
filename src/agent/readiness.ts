/** HTTP readiness probes of an engine: `/health` (process up) and `/v1/models` (weights loaded). */
import { modelsListModel, type ProbeResult } from "./replica-state.ts";

const PROBE_TIMEOUT_MS = 2_000;

/** `headers`: the engine's API key (vLLM guards /v1/models with it; /health is open). */
export type Probe = (baseUrl: string, model: string, headers?: Readonly<Record<string, string>>) => Promise<ProbeResult>;

async function get(url: string, headers: Readonly<Record<string, string>>): Promise<Response | undefined> {
  try {
    return await fetch(url, { headers, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  } catch {
    return undefined;
  }
}

export const httpProbe: Probe = async (baseUrl, model, headers = {}) => {
  const health = await get(`${baseUrl}/health`, headers);
  await health?.body?.cancel();
  if (health?.status !== 200) return { healthy: false, modelListed: false };
  const models = await get(`${baseUrl}/v1/models`, headers);
  if (models?.status !== 200) {
    await models?.body?.cancel();
    return { healthy: true, modelListed: false };
  }
  let body: unknown;
  try {
    body = await models.json();
  } catch {
    body = undefined;
  }
  return { healthy: true, modelListed: modelsListModel(body, model) };
};
