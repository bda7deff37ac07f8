/**
 * Scenario: a caller of the node agent's API sends a path with a malformed
 * percent-escape (`%zz`, a cut `%E0%A4%A`, bytes that are not UTF-8). It is
 * a 400 INVALID_REQUEST in the agent's (OpenAI) error shape — once the token
 * is checked — and never reaches the service; decodeURIComponent's URIError
 * used to make it a 500.
 */
import { describe, expect, test } from "bun:test";
import { createAgentHandler } from "../../src/agent/agent-server.ts";
import type { AgentService } from "../../src/agent/agent-service.ts";
import { decodePathSegment, malformedPathError } from "../../src/shared/path-segment.ts";

const TOKEN = "agent-token-0123456789";

/** A service that records what reached it: every call names the replica it was given. */
function recordingService(calls: string[]): AgentService {
  const record = (op: string) => (id: string, name?: string) => {
    calls.push(`${op} ${id}${name === undefined ? "" : ` ${name}`}`);
    return op === "status" ? { id } : Promise.resolve(op === "putReplica" ? { outcome: "unchanged", replica: { id } } : true);
  };
  return {
    status: record("status"),
    putReplica: record("putReplica"),
    deleteReplica: record("deleteReplica"),
    loadAdapter: record("loadAdapter"),
    unloadAdapter: record("unloadAdapter"),
  } as unknown as AgentService;
}

const MALFORMED = [
  "/v1/replicas/%E0%A4%A",
  "/v1/replicas/%zz",
  "/v1/replicas/%",
  "/v1/replicas/%C0%AF",
  "/v1/replicas/r1/adapters/%zz",
  "/v1/replicas/%E0/adapters/sql",
  "/%zz",
];

describe("the node agent and a malformed percent-encoding", () => {
  test("is a 400 in the agent's error shape for every method, and the service is never called", async () => {
    const calls: string[] = [];
    const handle = createAgentHandler(recordingService(calls), TOKEN);
    for (const path of MALFORMED) {
      for (const method of ["GET", "PUT", "DELETE"]) {
        const res = await handle(
          new Request(`http://127.0.0.1:7070${path}`, {
            method,
            headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
            ...(method === "PUT" ? { body: "{}" } : {}),
          }),
        );
        expect(res.status).toBe(400);
        const body = (await res.json()) as { error: { code: string; type: string; message: string; param: string | null } };
        expect(body.error).toMatchObject({ code: "INVALID_REQUEST", type: "invalid_request_error", param: null });
        expect(body.error.message).toContain("malformed percent-encoding");
      }
    }
    expect(calls).toEqual([]);
  });

  test("without the token it is a 401 (nothing is learned about the path); a well-formed escape is decoded", async () => {
    const calls: string[] = [];
    const handle = createAgentHandler(recordingService(calls), TOKEN);
    expect((await handle(new Request("http://127.0.0.1:7070/v1/replicas/%zz"))).status).toBe(401);
    const res = await handle(new Request("http://127.0.0.1:7070/v1/replicas/r%2D1", { headers: { authorization: `Bearer ${TOKEN}` } }));
    expect(res.status).toBe(200);
    expect(calls).toEqual(["status r-1"]);
  });

  test("the helper: a segment decodes or is undefined, a path is refused when any segment is malformed", () => {
    expect(decodePathSegment("plain")).toBe("plain");
    expect(decodePathSegment("%E6%A8%A1")).toBe("模");
    for (const bad of ["%zz", "%E0%A4%A", "%", "%C0%AF", "%ED%A0%80"]) expect(decodePathSegment(bad)).toBeUndefined();
    expect(malformedPathError("/v1/replicas/r1")).toBeUndefined();
    expect(malformedPathError("/v1/files/%E6%A8%A1")).toBeUndefined();
    expect(malformedPathError("/v1/replicas/%zz/adapters/a")?.status).toBe(400);
  });
});
