/**
 * Scenario: a client (or an SDK generator) fetches GET /openapi.json from a
 * gateway that requires API keys: it gets the data plane's OpenAPI document
 * without a key, as OpenAI's own specification is public, while the API
 * itself still wants one; the admin listener's reference page serves the
 * same document beside the admin API's and names both.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { type Gateway, startGateway } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

let gw: Gateway;

beforeAll(async () => {
  // Nothing listens at the endpoint: the document needs none.
  gw = await startGateway({ auth: { keys: [{ key: "sk-client-key-1", tenant: "acme" }] }, endpoints: [{ id: "e", url: "http://127.0.0.1:9" }] });
});

afterAll(stopAll);

describe("the data plane's OpenAPI document", () => {
  test("GET /openapi.json answers without a key; the API still wants one", async () => {
    const res = await fetch(`${gw.api}/openapi.json`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> };
    expect(doc.openapi).toBe("3.1.0");
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/chat/completions", "/v1/models", "/v1/files", "/openapi.json"]));
    expect((await fetch(`${gw.api}/v1/models`)).status).toBe(401);
  });

  test("another method is a 405 in OpenAI's shape naming GET", async () => {
    const res = await fetch(`${gw.api}/openapi.json`, { method: "POST", body: "{}" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe("METHOD_NOT_ALLOWED");
  });

  test("the admin listener's reference page names both documents, and serves the data plane's as the data plane does", async () => {
    const page = await (await fetch(`${gw.admin}/openapi`)).text();
    expect(page).toContain('data-spec="/openapi/json /openapi/data-plane.json"');
    const fromAdmin = await (await fetch(`${gw.admin}/openapi/data-plane.json`)).json();
    const fromDataPlane = await (await fetch(`${gw.api}/openapi.json`)).json();
    expect(fromAdmin).toEqual(fromDataPlane);
    // The admin API's own document does not list it as an operation.
    const admin = (await (await fetch(`${gw.admin}/openapi/json`)).json()) as { paths: Record<string, unknown> };
    expect(Object.keys(admin.paths).some((p) => p.includes("data-plane"))).toBe(false);
  });
});
