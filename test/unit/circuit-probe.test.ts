/**
 * The active probe's judgement against engines on loopback: a first event is
 * health, so is a refusal of the probe itself (4xx); a 5xx, a 429, an error
 * event, a stream with no first event within the probe's deadline, or a
 * refused connection is not. The body is one token of the route that failed.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { probeBody, sendProbe } from "../../src/gateway/circuit-probe.ts";

const bodies: unknown[] = [];
const engine = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 0,
  async fetch(req) {
    const body = (await req.json()) as { model: string };
    bodies.push(body);
    const sse = { "content-type": "text/event-stream" };
    switch (body.model) {
      case "ok":
        return new Response(': keep-alive\n\ndata: {"choices":[{"delta":{"content":"p"}}]}\n\ndata: [DONE]\n\n', { headers: sse });
      case "error-event":
        return new Response('data: {"error":{"message":"boom"}}\n\n', { headers: sse });
      case "silent":
        return new Response(new ReadableStream({ start() {} }), { headers: sse });
      case "busy":
        return Response.json({ error: { message: "slow down" } }, { status: 429, headers: { "retry-after": "3" } });
      case "refused":
        return Response.json({ error: { message: "max_tokens is not supported" } }, { status: 400 });
      default:
        return Response.json({ error: { message: "down" } }, { status: 503 });
    }
  },
});
const url = `http://127.0.0.1:${engine.port}`;

afterAll(() => engine.stop(true));

describe("an active probe", () => {
  test("sends one token of the route that failed", () => {
    expect(JSON.parse(probeBody({ route: "chat", model: "m" }))).toEqual({
      model: "m",
      messages: [{ role: "user", content: "ping" }],
      max_tokens: 1,
      stream: true,
    });
    expect(JSON.parse(probeBody({ route: "completions", model: "m" }))).toEqual({ model: "m", prompt: "ping", max_tokens: 1, stream: true });
    expect(JSON.parse(probeBody({ route: "embeddings", model: "m" }))).toEqual({ model: "m", input: "ping" });
  });

  test("judges what the engine did, within its own deadline", async () => {
    const probe = (model: string, timeoutMs = 2_000) => sendProbe(url, { route: "chat", model }, timeoutMs, "probe-test");
    expect(await probe("ok")).toEqual({ ok: true });
    expect(await probe("refused")).toEqual({ ok: true });
    expect(await probe("down")).toEqual({ ok: false });
    expect(await probe("error-event")).toEqual({ ok: false });
    expect(await probe("busy")).toEqual({ ok: false, retryAfterMs: 3_000 });
    const t0 = performance.now();
    expect(await probe("silent", 300)).toEqual({ ok: false });
    expect(performance.now() - t0).toBeLessThan(2_000);
    expect(await sendProbe("http://127.0.0.1:1", { route: "chat", model: "ok" }, 1_000, "probe-test")).toEqual({ ok: false });
    expect(bodies.length).toBe(6);
  });
});
