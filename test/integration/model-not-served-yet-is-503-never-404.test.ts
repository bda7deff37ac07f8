/**
 * 404 only for a model nobody serves. A gateway in front of an upstream whose
 * models are discovered but not listed yet (its /v1/models answers 503, as an
 * engine loading weights) and of a configured upstream nobody can reach: a
 * request in the first milliseconds after start, one for a model whose only
 * upstream is unreachable, and one for any name while discovery is pending
 * get 503 NO_READY_ENDPOINT with Retry-After — never 404 — and the
 * unreachable upstream is logged at warn. Once every upstream has listed its
 * models, a name none lists is 404 MODEL_NOT_FOUND.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { type Gateway, startGateway } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

let loading: Server<undefined>;
let listed = false;
let gw: Gateway;
let deadPort: number;

beforeAll(async () => {
  loading = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      if (path === "/health") return new Response("");
      if (path === "/v1/models")
        return listed ? Response.json({ object: "list", data: [{ id: "late-model", object: "model" }] }) : new Response("loading", { status: 503 });
      if (path === "/metrics") return new Response("", { status: 404 });
      return Response.json({
        id: "x",
        object: "chat.completion",
        model: "late-model",
        choices: [{ index: 0, message: { role: "assistant", content: "here" }, finish_reason: "stop" }],
        usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
      });
    },
  });
  // A port nothing listens on: bound once, then released.
  const probe = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
  deadPort = probe.port!;
  probe.stop(true);
  gw = await startGateway({
    health: { poll_interval_ms: 100 },
    endpoints: [
      { id: "loading", url: `http://127.0.0.1:${loading.port}` },
      { id: "unreachable", url: `http://127.0.0.1:${deadPort}`, models: ["configured-model"] },
    ],
  });
});

afterAll(async () => {
  await stopAll();
  loading.stop(true);
});

const chat = (model: string) =>
  fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
  });

async function expect503(model: string): Promise<void> {
  const r = await chat(model);
  const body = (await r.json()) as { error: { code: string; message: string; type: string } };
  expect({ model, status: r.status, code: body.error.code }).toEqual({ model, status: 503, code: "NO_READY_ENDPOINT" });
  expect(Number(r.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
  expect(body.error.message).toStartWith(`no ready endpoint serves model '${model}'`);
}

describe("before every upstream has listed its models", () => {
  test("the first requests after start: 503 with Retry-After for the model to come, for any name, and for a configured model whose upstream is unreachable", async () => {
    await expect503("late-model");
    await expect503("some-other-name");
    await expect503("configured-model");
  });

  test("the unreachable upstream is logged at warn", async () => {
    const line = await waitUntil(
      () =>
        gw
          .output()
          .split("\n")
          .find((l) => l.includes('"endpoint":"unreachable"') && l.includes("endpoint unreachable or unhealthy")),
      { what: "the warn line" },
    );
    expect((JSON.parse(line) as { level: number }).level).toBe(40);
  });
});

describe("once every upstream that can answer has listed its models", () => {
  test("the listed model is served; a name nobody serves is 404; the unreachable one's configured model stays 503", async () => {
    listed = true;
    await waitUntil(async () => (await chat("late-model")).status === 200, { what: "late-model to be served" });
    const r = await chat("nobody-serves-this");
    expect(r.status).toBe(404);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("MODEL_NOT_FOUND");
    await expect503("configured-model");
  });
});
