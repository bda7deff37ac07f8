/**
 * Agent self-registration: POST the node's name, API URL, token and node key
 * (node-key.ts) to the gateway's admin listener with the shared registration token, then again
 * every interval the gateway names (a restarted gateway, or one that moved,
 * finds the node again). Failures retry with backoff and never stop the agent.
 */
import { hostname } from "node:os";
import { AGENT_REGISTRATION_PATH, type AgentRegistration, agentRegistrationResponseSchema } from "../protocol/agent-messages.ts";
import type { Logger } from "../shared/logger.ts";

const RETRY_MIN_MS = 1_000;
const RETRY_MAX_MS = 30_000;
const CALL_TIMEOUT_MS = 10_000;

export interface RegistrationOptions {
  /** The gateway's admin listener, e.g. http://10.0.0.1:9090. */
  gatewayUrl: string;
  registrationToken: string;
  registration: AgentRegistration;
  log: Logger;
  /** Re-register at most this far apart, whatever the gateway says. */
  maxIntervalMs?: number;
}

/** The node name an agent registers under by default: the host name, made a valid node name. */
export function defaultNodeName(): string {
  const name = hostname()
    .toLowerCase()
    .replace(/[^a-z0-9._-]+/g, "-")
    .replace(/^[^a-z0-9]+/, "")
    .slice(0, 63);
  return name === "" ? "node" : name;
}

/** What a refusal says: the code and message of an OpenAI-shaped error (a 409 NODE_NAME_BOUND says what to do), else the start of the text. */
function refusal(text: string): string {
  try {
    const e = (JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }).error;
    if (typeof e?.code === "string" && typeof e.message === "string") return `${e.code}: ${e.message}`;
  } catch {
    // not JSON: the text itself
  }
  return text.slice(0, 300);
}

/** One registration; the interval the gateway asks for, or the error. */
async function registerOnce(
  opts: Pick<RegistrationOptions, "gatewayUrl" | "registrationToken" | "registration">,
): Promise<{ intervalMs: number } | { error: string }> {
  const url = new URL(AGENT_REGISTRATION_PATH, opts.gatewayUrl).toString();
  try {
    const res = await fetch(url, {
      method: "POST",
      signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      headers: { authorization: `Bearer ${opts.registrationToken}`, "content-type": "application/json" },
      body: JSON.stringify(opts.registration),
    });
    const text = await res.text();
    if (!res.ok) return { error: `POST ${url}: HTTP ${res.status}: ${refusal(text)}` };
    const parsed = agentRegistrationResponseSchema.safeParse(JSON.parse(text));
    if (!parsed.success) return { error: `POST ${url}: not a registration answer` };
    return { intervalMs: parsed.data.reregister_interval_ms };
  } catch (err) {
    return { error: `POST ${url}: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** Register now and keep registering until stop(). */
export function startRegistration(opts: RegistrationOptions): { stop(): void } {
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  let failures = 0;
  let lastError: string | undefined;
  const { log, registration } = opts;

  async function attempt(): Promise<void> {
    const r = await registerOnce(opts);
    if (stopped) return;
    let delay: number;
    if ("intervalMs" in r) {
      if (failures > 0 || lastError === undefined)
        log.info({ gateway: opts.gatewayUrl, node: registration.node, url: registration.url }, "registered with the gateway");
      failures = 0;
      lastError = "";
      delay = Math.min(r.intervalMs, opts.maxIntervalMs ?? Infinity);
    } else {
      failures++;
      // One warning per distinct error, not one per retry.
      if (r.error !== lastError)
        log.warn({ gateway: opts.gatewayUrl, node: registration.node, err: r.error }, "registration with the gateway failed; retrying");
      lastError = r.error;
      delay = Math.min(RETRY_MAX_MS, RETRY_MIN_MS * 2 ** (failures - 1));
    }
    timer = setTimeout(() => void attempt(), delay);
  }

  void attempt();
  return {
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
