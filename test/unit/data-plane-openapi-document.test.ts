/**
 * The data plane's OpenAPI document is well-formed OpenAPI 3.1 (every
 * operation answers something, every $ref resolves, every path parameter is
 * declared, every tag is defined) and documents every route the data plane
 * answers: a route added to the server without a description fails here.
 */
import { describe, expect, test } from "bun:test";
import { dataPlaneOpenApi } from "../../src/gateway/openapi/data-plane-openapi.ts";
import { MESSAGES_ROUTES, ROUTES } from "../../src/gateway/server.ts";

type Json = Record<string, unknown>;
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const;
const doc = dataPlaneOpenApi() as Json & { paths: Record<string, Json>; components: Json; tags: { name: string }[] };

function operations(): { path: string; method: string; op: Json; item: Json }[] {
  return Object.entries(doc.paths).flatMap(([path, item]) =>
    METHODS.filter((m) => item[m] !== undefined).map((method) => ({ path, method, op: item[method] as Json, item })),
  );
}

function resolve(pointer: string): unknown {
  if (!pointer.startsWith("#/")) return undefined;
  let at: unknown = doc;
  for (const raw of pointer.slice(2).split("/")) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (typeof at !== "object" || at === null || !(part in at)) return undefined;
    at = (at as Json)[part];
  }
  return at;
}

function refsIn(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) for (const v of node) refsIn(v, out);
  else if (typeof node === "object" && node !== null)
    for (const [k, v] of Object.entries(node)) {
      if (k === "$ref" && typeof v === "string") out.push(v);
      else refsIn(v, out);
    }
  return out;
}

const deref = (node: unknown): Json => {
  const n = node as Json;
  return typeof n.$ref === "string" ? (resolve(n.$ref) as Json) : n;
};

describe("the data plane's OpenAPI document", () => {
  test("is OpenAPI 3.1 with an info block, a bearer scheme and paths", () => {
    expect(doc.openapi).toBe("3.1.0");
    expect(doc.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    expect((doc.components.securitySchemes as Json).apiKey).toMatchObject({ type: "http", scheme: "bearer" });
    expect(Object.keys(doc.paths).length).toBeGreaterThan(10);
    expect(() => JSON.parse(JSON.stringify(doc))).not.toThrow();
  });

  test("every operation has responses, each with a description, and a tag the document defines", () => {
    const tags = new Set(doc.tags.map((t) => t.name));
    const ops = operations();
    expect(ops.length).toBeGreaterThan(20);
    for (const { path, method, op } of ops) {
      const where = `${method.toUpperCase()} ${path}`;
      const responses = op.responses as Json | undefined;
      expect(responses && Object.keys(responses).length > 0 ? where : `${where}: no responses`).toBe(where);
      for (const [status, r] of Object.entries(responses!)) {
        expect(/^([1-5]\d\d|[1-5]XX|default)$/.test(status) ? where : `${where}: bad status ${status}`).toBe(where);
        expect(typeof deref(r).description === "string" ? where : `${where} ${status}: no description`).toBe(where);
      }
      for (const t of (op.tags as string[] | undefined) ?? []) expect(tags.has(t) ? t : `${where}: undefined tag ${t}`).toBe(t);
    }
  });

  test("every $ref resolves inside the document", () => {
    const refs = refsIn(doc);
    expect(refs.length).toBeGreaterThan(20);
    expect(refs.filter((r) => resolve(r) === undefined)).toEqual([]);
  });

  test("every path parameter is declared on its path or operation", () => {
    for (const { path, method, op, item } of operations()) {
      const declared = new Set(
        [...((item.parameters as unknown[]) ?? []), ...((op.parameters as unknown[]) ?? [])]
          .map(deref)
          .filter((p) => p.in === "path")
          .map((p) => p.name),
      );
      for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) expect(declared.has(name) ? name : `${method} ${path}: {${name}} undeclared`).toBe(name!);
    }
  });

  test("documents every route the data plane routes by model, with POST and a JSON or form body", () => {
    const missing = [...Object.keys(ROUTES), ...Object.keys(MESSAGES_ROUTES)].filter((path) => {
      const post = doc.paths[path]?.post as Json | undefined;
      return post === undefined || (post.requestBody as Json | undefined) === undefined;
    });
    expect(missing).toEqual([]);
  });

  test("documents the other routes: models, stored responses, files and batches, health and the document itself", () => {
    const expected: [string, string][] = [
      ["/v1/models", "get"],
      ["/v1/responses/{response_id}", "get"],
      ["/v1/responses/{response_id}", "delete"],
      ["/v1/responses/{response_id}/input_items", "get"],
      ["/v1/responses/{response_id}/cancel", "post"],
      ["/v1/files", "post"],
      ["/v1/files", "get"],
      ["/v1/files/{file_id}", "get"],
      ["/v1/files/{file_id}", "delete"],
      ["/v1/files/{file_id}/content", "get"],
      ["/v1/batches", "post"],
      ["/v1/batches", "get"],
      ["/v1/batches/{batch_id}", "get"],
      ["/v1/batches/{batch_id}/cancel", "post"],
      ["/health", "get"],
      ["/openapi.json", "get"],
    ];
    expect(expected.filter(([p, m]) => doc.paths[p]?.[m] === undefined)).toEqual([]);
    // Public routes opt out of the bearer scheme; the rest inherit it.
    expect((doc.paths["/openapi.json"]!.get as Json).security).toEqual([]);
    expect(doc.security).toEqual([{ apiKey: [] }]);
  });

  test("the error shape, llmgw's headers and Idempotency-Key are described", () => {
    const schemas = doc.components.schemas as Json;
    expect(((schemas.Error as Json).properties as Json).error).toMatchObject({ required: ["message", "type", "param", "code"] });
    const headers = Object.keys(doc.components.headers as Json);
    expect(headers).toEqual(
      expect.arrayContaining(["x-request-id", "x-llmgw-attempts", "x-llmgw-endpoint", "x-llmgw-model", "x-llmgw-cache", "x-llmgw-replay"]),
    );
    const chat = doc.paths["/v1/chat/completions"]!.post as Json;
    const params = (chat.parameters as Json[]).map(deref).map((p) => p.name);
    expect(params).toEqual(expect.arrayContaining(["Idempotency-Key", "x-llmgw-priority", "x-request-id"]));
    expect(Object.keys(((chat.responses as Json)["200"] as Json).content as Json)).toEqual(["application/json", "text/event-stream"]);
  });
});
