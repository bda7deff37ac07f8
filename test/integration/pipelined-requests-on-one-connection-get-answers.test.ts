/**
 * Scenario: two requests pipelined in one TCP write, the first with a body,
 * then GET /health. Behind a refusal whose body was read whole (invalid
 * JSON, an unknown model, an invalid batch) both are answered in order; they
 * used to get the refusal and a closed connection. Behind a refusal before
 * the body was read (no key) the refusal arrives whole and the connection
 * closes. Behind a chat completion still waiting for its engine, Bun 1.4.5's
 * HTTP server (uWS: a request head parsed while the previous response is
 * pending closes the socket, before anything is written) leaves the gateway
 * nothing to answer on: the test shows that on a bare Bun.serve first, and
 * then requires the gateway to close promptly, stop the engine's work and go
 * on serving; a Bun that answers pipelined requests must get both answers.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { rawExchange } from "../helpers/raw-http.ts";

const KEY = "sk-pipelined-0123456789";
const HEALTH = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
let gw: Gateway;
let sim: Sim;

beforeAll(async () => {
  sim = await startSim(["--model", "m", "--itl-ms", "20"]);
  gw = await startGateway(
    {
      endpoints: [{ id: "sim", url: sim.api }],
      auth: { keys: [{ key: KEY, tenant: "t" }] },
      data_dir: join(mkdtempSync(join(tmpdir(), "llmgw-pipelined-")), "data"),
    },
    1,
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
});

const post = (path: string, body: string, key = KEY) =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

function errorLines(): string[] {
  return gw
    .output()
    .split("\n")
    .filter((l) => /"level":(50|60)/.test(l));
}

test("behind a refusal whose body was read whole, the pipelined request is answered too, in order", async () => {
  const cases: [string, string, number][] = [
    ["chat, invalid JSON", post("/v1/chat/completions", "{not json"), 400],
    ["chat, unknown model", post("/v1/chat/completions", JSON.stringify({ model: "nope", messages: [{ role: "user", content: "hi" }] })), 404],
    ["batch, invalid JSON", post("/v1/batches", "{not json"), 400],
  ];
  for (const [what, first, status] of cases) {
    const r = await rawExchange(gw.api, first + HEALTH, { expect: 2, waitMs: 10_000 });
    expect({ what, statuses: r.responses.map((x) => x.status) }).toEqual({ what, statuses: [status, 200] });
  }
});

test("behind a refusal before the body was read (no key), the refusal arrives whole and the connection closes", async () => {
  const r = await rawExchange(gw.api, post("/v1/chat/completions", JSON.stringify({ model: "m", messages: [] }), "sk-wrong-000000000000000") + HEALTH, {
    waitMs: 10_000,
  });
  expect(r.responses[0]?.status).toBe(401);
  expect(JSON.parse(r.responses[0]!.body).error.code).toBe("INVALID_API_KEY");
  expect(r.closedAfterMs).toBeDefined();
});

/** Whether this Bun's HTTP server answers a request pipelined behind an async answer (Bun 1.4.5 closes the connection instead). */
async function bunAnswersPipelinedBehindAsync(): Promise<boolean> {
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      if (new URL(req.url).pathname === "/health") return new Response("ok");
      await req.text();
      await Bun.sleep(50);
      return new Response("first");
    },
  });
  try {
    const r = await rawExchange(`http://127.0.0.1:${server.port}`, `POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}${HEALTH}`, {
      expect: 2,
      waitMs: 5_000,
    });
    return r.responses.length > 0;
  } finally {
    server.stop(true);
  }
}

test("behind a chat completion in flight: both answered in order where Bun allows it; otherwise the connection closes promptly, the engine drops the request, and service goes on", async () => {
  const first = post(
    "/v1/chat/completions",
    JSON.stringify({ model: "m", stream: true, max_tokens: 200, messages: [{ role: "user", content: "a long answer please" }] }),
  );
  const bunAnswers = await bunAnswersPipelinedBehindAsync();
  const r = await rawExchange(gw.api, first + HEALTH, { waitMs: 10_000 });
  if (bunAnswers) {
    // The gateway adds nothing that would stop it: the stream, then /health.
    expect(r.raw).toContain("data: [DONE]");
    expect(r.raw.indexOf("HTTP/1.1 200", 10)).toBeGreaterThan(r.raw.indexOf("data: [DONE]"));
  } else {
    // Bun closed the socket as it parsed the second head: nothing was written, and the close came at once (not at an idle timeout).
    expect(r.raw).toBe("");
    expect(r.closedAfterMs).toBeDefined();
    expect(r.closedAfterMs!).toBeLessThan(5_000);
    // The first request does not run on unseen: the engine is told to stop it (200 tokens at 20 ms would take 4 s).
    await waitUntil(async () => (await sim.state()).running === 0, { timeoutMs: 3_000, what: "the sim to drop the abandoned stream" });
  }
  expect(errorLines()).toEqual([]);
  const after = await rawExchange(
    gw.api,
    post("/v1/chat/completions", JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "hi" }] })),
    { expect: 1, waitMs: 10_000 },
  );
  expect(after.responses[0]?.status).toBe(200);
}, 60_000);
