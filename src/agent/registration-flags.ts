/** The `llmgw agent` flags for self-registration with a gateway, and the registration they describe. */
import { hostname } from "node:os";
import { type AgentRegistration, NODE_NAME_RE } from "../protocol/agent-messages.ts";
import { type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { defaultNodeName, type RegistrationOptions } from "./registration.ts";

export const REGISTRATION_OPTIONS = {
  register: { type: "string" },
  "registration-token": { type: "string" },
  "node-name": { type: "string" },
  "advertise-url": { type: "string" },
  "dcgm-url": { type: "string" },
} as const;

export const REGISTRATION_USAGE = `  --register URL            register with this gateway's admin listener (e.g. http://gw:9090), and again periodically
  --registration-token T    the gateway's fleet.registration_token (or LLMGW_REGISTRATION_TOKEN)
  --node-name NAME          node name to register under (default: the host name)
  --advertise-url URL       this agent's URL as the gateway reaches it (default http://<advertise host>:<port>)
  --dcgm-url URL            this node's dcgm-exporter, sent with the registration`;

function httpUrl(value: string, flag: string): string {
  try {
    const u = new URL(value);
    if (u.protocol === "http:" || u.protocol === "https:") return value;
  } catch {
    // reported below
  }
  throw new UsageError(`${flag}: expected an http(s) URL, got '${value}'`);
}

/** null without --register; otherwise what is known before the listener starts, completed by resolve(). */
export function registrationFromFlags(
  args: ParsedArgs,
  env: Record<string, string | undefined>,
): { resolve(agent: { token: string; port: number; host: string; nodeKey: string }): Omit<RegistrationOptions, "log"> } | null {
  const gateway = stringFlag(args, "register");
  if (gateway === undefined) {
    for (const f of ["registration-token", "node-name", "advertise-url", "dcgm-url"])
      if (stringFlag(args, f) !== undefined) throw new UsageError(`--${f} needs --register URL`);
    return null;
  }
  const gatewayUrl = httpUrl(gateway, "--register");
  const registrationToken = stringFlag(args, "registration-token") ?? env.LLMGW_REGISTRATION_TOKEN;
  if (!registrationToken) throw new UsageError("--register needs a registration token: --registration-token TOKEN or LLMGW_REGISTRATION_TOKEN");
  const node = stringFlag(args, "node-name") ?? defaultNodeName();
  if (!NODE_NAME_RE.test(node)) throw new UsageError(`--node-name: expected letters, digits, '.', '_' or '-' (at most 63), got '${node}'`);
  const advertiseUrl = stringFlag(args, "advertise-url");
  if (advertiseUrl !== undefined) httpUrl(advertiseUrl, "--advertise-url");
  const dcgmUrl = stringFlag(args, "dcgm-url");
  if (dcgmUrl !== undefined) httpUrl(dcgmUrl, "--dcgm-url");
  return {
    resolve({ token, port, host, nodeKey }) {
      // An agent bound to every interface is reached by its host name, not by 0.0.0.0.
      const reachable = host === "0.0.0.0" || host === "::" || host === "" ? hostname() : host;
      const url = advertiseUrl ?? `http://${reachable.includes(":") ? `[${reachable}]` : reachable}:${port}`;
      const registration: AgentRegistration = { node, url, token, node_key: nodeKey, ...(dcgmUrl !== undefined ? { dcgm_url: dcgmUrl } : {}) };
      return { gatewayUrl, registrationToken, registration };
    },
  };
}
