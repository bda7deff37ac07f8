/**
 * Scenario: a client without a key declares a large body, gets its 401, and
 * used to keep the socket while Bun drained the body (a byte every < 120 s
 * held it forever; 450 such sockets under a 400 open-files limit made every
 * healthy request time out). A refusal before the body is read now closes
 * the connection at once: 300 keyless sockets are all answered and closed,
 * and a client with a key keeps its connection alive as before.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { closedWithin, openSocket, parseResponses, rawExchange } from "../helpers/raw-http.ts";

const KEY = "sk-hold-test-0123456789";
const SOCKETS = 300;
let gw: Gateway;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway({ endpoints: [{ id: "sim", url: sim.api }], auth: { keys: [{ key: KEY, tenant: "t" }] }, max_body_bytes: 1024 * 1024 }, 1);
}, 60_000);

afterAll(async () => {
  await stopAll();
});

const declared = (path: string, headers = "") =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\n${headers}Content-Type: application/json\r\nContent-Length: 100000000\r\n\r\n{"mo`;

test(`${SOCKETS} keyless clients that declare a large body are each answered 401 and closed; a healthy request still goes through`, async () => {
  const sockets = await Promise.all(Array.from({ length: SOCKETS }, () => openSocket(gw.api)));
  const answers = sockets.map((s) => {
    let raw = "";
    s.on("data", (d: Buffer) => (raw += d.toString("latin1")));
    s.on("error", () => {});
    return () => raw;
  });
  for (const s of sockets) s.write(declared("/v1/chat/completions"));
  const closed = await Promise.all(sockets.map((s) => closedWithin(s, 5_000)));
  expect(closed.filter((c) => !c).length).toBe(0);
  const statuses = answers.map((raw) => parseResponses(raw())[0]?.status);
  expect(statuses.filter((s) => s !== 401)).toEqual([]);
  for (const s of sockets) s.destroy();
  const ok = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "m", max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
  });
  expect(ok.status).toBe(200);
}, 60_000);

test("every refusal before the body closes: a wrong key, the Files API, /v1/models, a body over the limit, a wrong method or route with a body", async () => {
  const cases: [string, string, number][] = [
    ["wrong key", declared("/v1/chat/completions", "Authorization: Bearer sk-wrong\r\n"), 401],
    ["files upload without key", declared("/v1/files"), 401],
    ["models without key", "GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n", 401],
    ["declared over max_body_bytes", declared("/v1/chat/completions", `Authorization: Bearer ${KEY}\r\n`), 413],
    ["GET with a body on a POST route", `GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{`, 405],
    ["unknown route with a body", `POST /v1/nothing HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n{`, 404],
  ];
  for (const [what, payload, status] of cases) {
    const r = await rawExchange(gw.api, payload, { waitMs: 5_000 });
    expect({ what, status: r.responses[0]?.status, closed: r.closedAfterMs !== undefined && r.closedAfterMs < 3_000 }).toEqual({ what, status, closed: true });
    expect(r.responses[0]!.headers.connection).toBe("close");
    expect(JSON.parse(r.responses[0]!.body).error.type).toBeString();
  }
});

test("a client with a key keeps its connection alive across requests", async () => {
  const body = JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "hi" }] });
  const one = `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  const s = await openSocket(gw.api);
  let raw = "";
  s.on("data", (d: Buffer) => (raw += d.toString("latin1")));
  for (let i = 1; i <= 3; i++) {
    s.write(one);
    const deadline = Date.now() + 10_000;
    while (parseResponses(raw).filter((r) => r.body.includes("chat.completion")).length < i && Date.now() < deadline) await Bun.sleep(20);
  }
  expect(parseResponses(raw).map((r) => r.status)).toEqual([200, 200, 200]);
  expect(await closedWithin(s, 300)).toBe(false);
  s.destroy();
});
