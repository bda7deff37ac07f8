/** HTTP readiness probes of an engine: `/health` (process up) and `/v1/models` (weights loaded). */
import { modelsListModel, type ProbeResult } from "./replica-state.ts";

const PROBE_TIMEOUT_MS = 2_000;

export type Probe = (baseUrl: string, model: string) => Promise<ProbeResult>;

async function get(url: string): Promise<Response | undefined> {
  try {
    return await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
  } catch {
    return undefined;
  }
}

export const httpProbe: Probe = async (baseUrl, model) => {
  const health = await get(`${baseUrl}/health`);
  await health?.body?.cancel();
  if (health?.status !== 200) return { healthy: false, modelListed: false };
  const models = await get(`${baseUrl}/v1/models`);
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
