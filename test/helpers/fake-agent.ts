/**
 * An in-process stand-in for a node agent's HTTP API (Bun.serve on port 0),
 * for tests of the control plane that need an agent to misbehave on cue:
 * answer garbage, never answer, or refuse launches. Replicas it accepts are
 * Ready at once; their "engine" URL is never called by these tests.
 */
import type { Server } from "bun";
import type { AgentGpu, AgentReplicaSpec, AgentReplicaStatus, AgentState } from "../../src/protocol/agent-messages.ts";

export type FakeAgentMode = "ok" | "garbage" | "wrong-shape" | "hang" | "refuse-launch";

export interface FakeAgent {
  node: string;
  url: string;
  token: string;
  mode: FakeAgentMode;
  gpus: AgentGpu[];
  readonly replicas: Map<string, AgentReplicaStatus>;
  readonly puts: { id: string; spec: AgentReplicaSpec }[];
  readonly deletes: string[];
  stop(): Promise<void>;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

export function startFakeAgent(node: string, gpus: AgentGpu[], opts: { token?: string; mode?: FakeAgentMode } = {}): FakeAgent {
  const hung: ((r: Response) => void)[] = [];
  let server: Server<unknown>;
  const agent: FakeAgent = {
    node,
    url: "",
    token: opts.token ?? "fake-agent-token",
    mode: opts.mode ?? "ok",
    gpus,
    replicas: new Map(),
    puts: [],
    deletes: [],
    async stop() {
      for (const release of hung.splice(0)) release(new Response("bye", { status: 503 }));
      await server.stop(true);
    },
  };
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 30,
    async fetch(req) {
      const url = new URL(req.url);
      if (req.headers.get("authorization") !== `Bearer ${agent.token}`)
        return json({ error: { message: "bad token", type: "authentication_error", param: null, code: "UNAUTHORIZED" } }, 401);
      if (agent.mode === "hang") return new Promise<Response>((resolve) => hung.push(resolve));
      if (url.pathname === "/v1/state") {
        if (agent.mode === "garbage") return new Response("<html>502 Bad Gateway</html>", { status: 200 });
        if (agent.mode === "wrong-shape") return json({ node, gpus: "eight", replicas: [] });
        const state: AgentState = { node, gpus: agent.gpus, fabric: { adapters: [], island: "single-node" }, replicas: [...agent.replicas.values()] };
        return json(state);
      }
      const m = /^\/v1\/replicas\/([^/]+)$/.exec(url.pathname);
      const id = m ? decodeURIComponent(m[1]!) : "";
      if (m && req.method === "PUT") {
        const spec = (await req.json()) as AgentReplicaSpec;
        agent.puts.push({ id, spec });
        if (agent.mode === "refuse-launch") {
          return json(
            {
              error: {
                message: `gpu-in-use: GPU ${spec.gpus[0]} is already used by replica 'someone-else'`,
                type: "invalid_request_error",
                param: "gpus",
                code: "VALIDATION_FAILED",
              },
            },
            400,
          );
        }
        const existed = agent.replicas.has(id);
        const replica: AgentReplicaStatus = {
          id,
          engine: spec.engine,
          model: spec.model,
          gpus: spec.gpus,
          port: 9,
          endpoint: `http://127.0.0.1:9/${id}`,
          state: "Ready",
          pid: 1,
          restarts: 0,
          adopted: false,
          exitCode: null,
          exitSignal: null,
          message: null,
          nextRestartInMs: null,
          logTail: null,
        };
        agent.replicas.set(id, replica);
        return json({ outcome: existed ? "unchanged" : "created", replica }, existed ? 200 : 201);
      }
      if (m && req.method === "DELETE") {
        agent.deletes.push(id);
        if (!agent.replicas.delete(id))
          return json({ error: { message: "no such replica", type: "invalid_request_error", param: null, code: "NOT_FOUND" } }, 404);
        return json({ id, deleted: true });
      }
      return json({ error: { message: "no route", type: "invalid_request_error", param: null, code: "NOT_FOUND" } }, 404);
    },
  });
  agent.url = `http://127.0.0.1:${server.port}`;
  return agent;
}
