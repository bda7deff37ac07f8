import { describe, expect, test } from "bun:test";
import { API_KEY, chatBody, inProcessGateway } from "../helpers/in-process-gateway.ts";

/** Every route that needs a key, as a client would call it. */
const ROUTES: { name: string; path: string; init: RequestInit }[] = [
  { name: "chat completions", path: "/v1/chat/completions", init: { method: "POST", headers: { "content-type": "application/json" }, body: chatBody() } },
  { name: "models", path: "/v1/models", init: { method: "GET" } },
  { name: "files", path: "/v1/files", init: { method: "GET" } },
  {
    name: "batches",
    path: "/v1/batches",
    init: {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: "file-x", endpoint: "/v1/chat/completions", completion_window: "24h" }),
    },
  },
  { name: "stored response", path: "/v1/responses/resp_abc123", init: { method: "GET" } },
];

const KEYS: { name: string; authorization: string | undefined }[] = [
  { name: "a missing key", authorization: undefined },
  { name: "a wrong key", authorization: "Bearer sk-wrong-000000000" },
];

const UNAUTHORIZED = { band: "none", reason: "unauthorized" };

describe("the auth gate refuses every route alike", () => {
  for (const key of KEYS) {
    test(`${key.name}: 401 INVALID_API_KEY in OpenAI's shape, connection closed, counted — on every route`, async () => {
      const gw = inProcessGateway();
      const seen: unknown[] = [];
      for (const route of ROUTES) {
        const headers = new Headers(route.init.headers);
        if (key.authorization !== undefined) headers.set("authorization", key.authorization);
        const before = await gw.counter("llmgw_admission_rejections_total", UNAUTHORIZED);
        const res = await gw.request(route.path, { ...route.init, headers });
        const body = (await res.json()) as { error: Record<string, unknown> };
        const after = await gw.counter("llmgw_admission_rejections_total", UNAUTHORIZED);
        const got: Record<string, unknown> = {
          status: res.status,
          connection: res.headers.get("connection"),
          contentType: res.headers.get("content-type"),
          counted: after - before,
          error: { ...body.error, message: typeof body.error.message },
        };
        expect({ route: route.name, ...got } as Record<string, unknown>).toEqual({
          route: route.name,
          status: 401,
          connection: "close",
          contentType: "application/json",
          counted: 1,
          error: { message: "string", type: "authentication_error", param: null, code: "INVALID_API_KEY" },
        });
        seen.push(got);
      }
      // Identical on every route: one gate, one behaviour.
      for (const s of seen) expect(s).toEqual(seen[0]);
    });
  }

  test("the right key passes the gate on every route (no refusal counted)", async () => {
    const gw = inProcessGateway();
    const res = await gw.request("/v1/models", { headers: { authorization: `Bearer ${API_KEY}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("connection")).toBeNull();
    expect(await gw.counter("llmgw_admission_rejections_total", UNAUTHORIZED)).toBe(0);
  });
});
