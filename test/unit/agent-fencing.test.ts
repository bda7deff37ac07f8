/** Fencing (issue 14): the agent keeps the highest reconciler token across restarts and refuses a lower one; the gateway's agent client sends its token and reads the refusal as `fenced`. */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FENCING_FILE, FencingGuard } from "../../src/agent/fencing.ts";
import { AgentCallError, httpAgentClient } from "../../src/control/agent-client.ts";
import { type AgentReplicaSpec, FENCING_TOKEN_HEADER } from "../../src/protocol/agent-messages.ts";
import { asLlmgwError, errorResponse, type LlmgwError } from "../../src/shared/errors.ts";
import { setLogLevel } from "../../src/shared/logger.ts";

setLogLevel("silent");

function refusal(fn: () => void): LlmgwError {
  try {
    fn();
  } catch (err) {
    return asLlmgwError(err);
  }
  throw new Error("expected a refusal");
}

describe("agent fencing guard", () => {
  test("accepts rising tokens, refuses lower ones with 409, remembers the highest across restarts", () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-fencing-"));
    try {
      const g = new FencingGuard(dir);
      expect(g.highest).toBe(0);
      g.check(null); // no header: a single gateway, not fenced
      g.check("3");
      g.check("3");
      g.check("7");
      expect(readFileSync(join(dir, FENCING_FILE), "utf8").trim()).toBe("7");
      const stale = refusal(() => g.check("6"));
      expect(stale.code).toBe("STALE_FENCING_TOKEN");
      expect(stale.status).toBe(409);
      expect(stale.message).toContain("token 7");
      const again = new FencingGuard(dir);
      expect(again.highest).toBe(7);
      expect(refusal(() => again.check("5")).code).toBe("STALE_FENCING_TOKEN");
      for (const bad of ["0", "-1", "1.5", "abc", "99999999999999999"]) expect(refusal(() => again.check(bad)).code).toBe("INVALID_REQUEST");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("agent client and fencing", () => {
  const spec: AgentReplicaSpec = { engine: "sim", model: "m", gpus: [0], tensorParallel: 1, pipelineParallel: 1, extraArgs: [] };

  test("the lease token rides on PUT and DELETE; a stale one comes back as a `fenced` failure, not a refusal of the spec", async () => {
    const guard = new FencingGuard();
    const seen: (string | null)[] = [];
    const agentFetch = async (_url: string, init: RequestInit): Promise<Response> => {
      const token = new Headers(init.headers).get(FENCING_TOKEN_HEADER);
      seen.push(token);
      try {
        guard.check(token);
      } catch (err) {
        return errorResponse(asLlmgwError(err));
      }
      if (init.method === "DELETE") return Response.json({ id: "fl-x", deleted: true });
      return Response.json(
        {
          outcome: "created",
          replica: {
            id: "fl-x",
            engine: "sim",
            model: "m",
            gpus: [0],
            port: 1,
            endpoint: "http://127.0.0.1:1",
            state: "Starting",
            pid: 1,
            restarts: 0,
            adopted: false,
            exitCode: null,
            exitSignal: null,
            message: null,
            nextRestartInMs: null,
            logTail: null,
          },
        },
        { status: 201 },
      );
    };
    let token: number | undefined = 5;
    const client = httpAgentClient(1_000, agentFetch, () => token);
    const agent = { url: "http://agent", token: "t" };
    await client.putReplica(agent, "fl-x", spec);
    await client.deleteReplica(agent, "fl-x");
    expect(seen).toEqual(["5", "5"]);
    // A newer leader called the agent with 6; the old one (5) is refused.
    guard.check("6");
    const err = await client.putReplica(agent, "fl-x", spec).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AgentCallError);
    expect((err as AgentCallError).kind).toBe("fenced");
    // Without a lease (one gateway) no header is sent.
    token = undefined;
    await client.deleteReplica(agent, "fl-x");
    expect(seen.at(-1)).toBeNull();
  });
});
