/** Bad input gets vLLM's statuses and error shape without hurting the process; startup delay, dead flag and shutdown behave. */
import { afterAll, expect, test } from "bun:test";
import { startLlmgw, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

const post = (url: string, path: string, body: string) => fetch(`${url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });

test("malformed JSON, missing model, unknown model, bad types and a too-long prompt: vLLM errors, and the engine still serves", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "2", "--max-model-len", "64"]);
  const cases: [string, string, number, string][] = [
    ["/v1/chat/completions", "{oops", 400, "BadRequestError"],
    ["/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: "x" }] }), 400, "BadRequestError"],
    ["/v1/chat/completions", JSON.stringify({ model: "nope", messages: [{ role: "user", content: "x" }] }), 404, "NotFoundError"],
    ["/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: -1 }), 400, "BadRequestError"],
    ["/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(400) }] }), 400, "BadRequestError"],
    ["/v1/completions", JSON.stringify({ model: "m", prompt: 42 }), 400, "BadRequestError"],
    ["/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 1000 }), 400, "BadRequestError"],
    ["/v1/embeddings", JSON.stringify({ model: "m" }), 400, "BadRequestError"],
  ];
  for (const [path, body, status, type] of cases) {
    const res = await post(sim.url, path, body);
    expect(res.status).toBe(status);
    const err = (await res.json()) as { error: { message: string; type: string; param: string | null; code: number } };
    expect(Object.keys(err.error)).toEqual(["message", "type", "param", "code"]);
    expect([err.error.type, err.error.code]).toEqual([type, status]);
    expect(err.error.message.length).toBeGreaterThan(0);
  }
  const tooLong = (await (await post(sim.url, "/v1/chat/completions", cases[4]![1])).json()) as { error: { message: string } };
  expect(tooLong.error.message).toMatch(/maximum context length is 64 tokens/);
  expect((await fetch(`${sim.url}/nowhere`)).status).toBe(404);
  expect((await fetch(`${sim.url}/v1/chat/completions`)).status).toBe(405);
  // Still serving.
  const ok = await post(sim.url, "/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 2 }));
  expect(ok.status).toBe(200);
  expect(sim.proc.exitCode).toBeNull();
});

test("--startup-ms held (as vLLM): every request made while loading is answered once the weights are loaded", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--startup-ms", "1500"]);
  const t0 = performance.now();
  const [health, models, done] = await Promise.all([
    fetch(`${sim.url}/health`).then((r) => [r.status, performance.now() - t0]),
    fetch(`${sim.url}/v1/models`).then((r) => [r.status, performance.now() - t0]),
    post(sim.url, "/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 1 })).then((r) => [r.status, performance.now() - t0]),
  ]);
  for (const [status, ms] of [health!, models!, done!]) {
    expect(status).toBe(200);
    expect(ms).toBeGreaterThan(1_000);
  }
  expect((await fetch(`${sim.url}/health`)).status).toBe(200);
});

test("--startup-ms split: /health 200 but /v1/models and completions 503 while loading, then ready", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--startup-ms", "1500", "--startup-answers", "split"]);
  expect((await fetch(`${sim.url}/health`)).status).toBe(200);
  const models = await fetch(`${sim.url}/v1/models`);
  expect(models.status).toBe(503);
  expect(((await models.json()) as { error: { code: number } }).error.code).toBe(503);
  expect((await post(sim.url, "/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 1 }))).status).toBe(503);
  await Bun.sleep(1600);
  expect((await fetch(`${sim.url}/v1/models`)).status).toBe(200);
  expect((await post(sim.url, "/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 1 }))).status).toBe(200);
});

test("dead: /health 503 and completions 503; alive again when cleared", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m"]);
  const set = (dead: boolean) => post(sim.url, "/sim/config", JSON.stringify({ dead }));
  expect((await set(true)).status).toBe(200);
  const health = await fetch(`${sim.url}/health`);
  expect(health.status).toBe(503);
  expect(await health.text()).toBe("");
  expect((await post(sim.url, "/v1/chat/completions", JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }))).status).toBe(503);
  expect(((await (await fetch(`${sim.url}/sim/state`)).json()) as { dead: boolean }).dead).toBe(true);
  await set(false);
  expect((await fetch(`${sim.url}/health`)).status).toBe(200);
});

test("SIGTERM with an open stream: the stream ends, the process exits 0", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "100"]);
  const res = await post(sim.url, "/v1/completions", JSON.stringify({ model: "m", prompt: "x", max_tokens: 500, stream: true }));
  const reader = res.body!.getReader();
  await reader.read();
  const code = await sim.stop("SIGTERM");
  expect(code).toBe(0);
  // The stream ends (cleanly or with an error) instead of hanging, and never claims completion.
  const dec = new TextDecoder();
  let rest = "";
  const drained = (async () => {
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) return "ended";
        rest += dec.decode(r.value);
      }
    } catch {
      return "ended";
    }
  })();
  expect(await Promise.race([drained, Bun.sleep(3_000).then(() => "hung")])).toBe("ended");
  expect(rest).not.toContain("[DONE]");
  expect(sim.output()).toContain("shutting down");
});
