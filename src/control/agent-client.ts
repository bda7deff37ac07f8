/**
 * The control plane's calls to node agents (PUT and DELETE a replica), each
 * under its own deadline, every answer checked against the protocol. A
 * failure is an AgentCallError whose kind says whose fault it is: `refused`
 * (the agent said no to this spec: the replica's problem) or anything else
 * (the agent's problem: shown on the node, retried).
 */

import {
  type AgentAdapterResponse,
  type AgentPutReplicaResponse,
  type AgentReplicaSpec,
  agentAdapterResponseSchema,
  agentDeleteReplicaResponseSchema,
  agentPutReplicaResponseSchema,
  FENCING_TOKEN_HEADER,
} from "../protocol/agent-messages.ts";
import { errorBodyMessage } from "../shared/errors.ts";

/** `fenced`: the agent has seen a newer reconciler's token; this gateway is no longer the leader and must not act. */
type AgentCallFailure = "refused" | "unauthorized" | "unreachable" | "timeout" | "garbage" | "server-error" | "fenced";

export class AgentCallError extends Error {
  constructor(
    readonly kind: AgentCallFailure,
    message: string,
    readonly status: number | undefined = undefined,
  ) {
    super(message);
    this.name = "AgentCallError";
  }
}

export interface AgentAddress {
  url: string;
  token: string;
}

export interface AgentClient {
  putReplica(agent: AgentAddress, agentId: string, spec: AgentReplicaSpec): Promise<AgentPutReplicaResponse>;
  /** "absent" when the agent did not know the replica (already gone). */
  deleteReplica(agent: AgentAddress, agentId: string): Promise<"deleted" | "absent">;
  /** Load a LoRA adapter into a replica's engine (absent on clients that predate adapters: the fleet then loads none). */
  putAdapter?(agent: AgentAddress, agentId: string, adapter: string, path: string): Promise<AgentAdapterResponse["outcome"]>;
  deleteAdapter?(agent: AgentAddress, agentId: string, adapter: string): Promise<AgentAdapterResponse["outcome"]>;
}

type FetchFn = (url: string, init: RequestInit) => Promise<Response>;

function errorCodeOf(text: string): string | undefined {
  try {
    const code = (JSON.parse(text) as { error?: { code?: unknown } }).error?.code;
    return typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `fencingToken`: the reconciler lease's token, sent with every PUT and
 * DELETE; undefined (a single gateway) sends none.
 */
export function httpAgentClient(
  timeoutMs: number,
  fetchFn: FetchFn = (url, init) => fetch(url, init),
  fencingToken: () => number | undefined = () => undefined,
): AgentClient {
  async function call(
    agent: AgentAddress,
    method: "PUT" | "DELETE",
    agentId: string,
    body?: unknown,
    adapter?: string,
  ): Promise<{ status: number; json: unknown }> {
    const path = `/v1/replicas/${encodeURIComponent(agentId)}${adapter === undefined ? "" : `/adapters/${encodeURIComponent(adapter)}`}`;
    const url = new URL(path, agent.url).toString();
    const label = `${method} ${url}`;
    const deadline = AbortSignal.timeout(timeoutMs);
    let res: Response;
    let text: string;
    const fence = fencingToken();
    try {
      res = await fetchFn(url, {
        method,
        signal: deadline,
        headers: {
          authorization: `Bearer ${agent.token}`,
          ...(body === undefined ? {} : { "content-type": "application/json" }),
          ...(fence === undefined ? {} : { [FENCING_TOKEN_HEADER]: String(fence) }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      text = await res.text();
    } catch (err) {
      if (deadline.aborted) throw new AgentCallError("timeout", `${label}: no answer within ${timeoutMs} ms`);
      throw new AgentCallError("unreachable", `${label}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (res.status === 401 || res.status === 403) throw new AgentCallError("unauthorized", `${label}: the agent refused the token (${res.status})`, res.status);
    if (res.status >= 500) throw new AgentCallError("server-error", `${label}: HTTP ${res.status}: ${errorBodyMessage(text)}`, res.status);
    if (method === "DELETE" && res.status === 404 && adapter === undefined) return { status: 404, json: null };
    if (res.status === 409 && errorCodeOf(text) === "STALE_FENCING_TOKEN")
      throw new AgentCallError("fenced", `${label}: ${errorBodyMessage(text)}`, res.status);
    // 400 is the agent's validation refusal (the message names the rule); other 4xx mean this is not an agent's API.
    // An adapter call's 404 is an unknown replica: the replica's problem, like a refusal.
    if (res.status === 400 || res.status === 409 || res.status === 422 || (adapter !== undefined && res.status === 404))
      throw new AgentCallError("refused", errorBodyMessage(text), res.status);
    if (res.status >= 300) throw new AgentCallError("garbage", `${label}: unexpected HTTP ${res.status}: ${errorBodyMessage(text)}`, res.status);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AgentCallError("garbage", `${label}: HTTP ${res.status} with a body that is not JSON`, res.status);
    }
    return { status: res.status, json };
  }

  return {
    async putReplica(agent, agentId, spec) {
      const { status, json } = await call(agent, "PUT", agentId, spec);
      const parsed = agentPutReplicaResponseSchema.safeParse(json);
      if (!parsed.success)
        throw new AgentCallError(
          "garbage",
          `PUT ${agentId}: not a replica answer (${parsed.error.issues[0]?.path.join(".") || "(root)"}: ${parsed.error.issues[0]?.message})`,
          status,
        );
      return parsed.data;
    },
    async deleteReplica(agent, agentId) {
      const { status, json } = await call(agent, "DELETE", agentId);
      if (status === 404) return "absent";
      if (!agentDeleteReplicaResponseSchema.safeParse(json).success) throw new AgentCallError("garbage", `DELETE ${agentId}: not a delete answer`, status);
      return "deleted";
    },
    async putAdapter(agent, agentId, adapter, path) {
      const { status, json } = await call(agent, "PUT", agentId, { path }, adapter);
      const parsed = agentAdapterResponseSchema.safeParse(json);
      if (!parsed.success) throw new AgentCallError("garbage", `PUT ${agentId} adapter ${adapter}: not an adapter answer`, status);
      return parsed.data.outcome;
    },
    async deleteAdapter(agent, agentId, adapter) {
      const { status, json } = await call(agent, "DELETE", agentId, undefined, adapter);
      const parsed = agentAdapterResponseSchema.safeParse(json);
      if (!parsed.success) throw new AgentCallError("garbage", `DELETE ${agentId} adapter ${adapter}: not an adapter answer`, status);
      return parsed.data.outcome;
    },
  };
}
