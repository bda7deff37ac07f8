/**
 * Scenario: a small fuzz of both listeners over raw sockets — bad request
 * lines, no Host, broken Content-Length and chunked framing, JSON of the
 * wrong types in every field the gateway reads, broken multipart, odd
 * methods and paths. Whatever the handlers answer is a 4xx in OpenAI's
 * shape; what Bun's HTTP parser refuses before any handler runs is its own
 * bare 400 (505 for an unknown HTTP version) with the connection closed.
 * Never a 500, never a hang, and the gateway logs no error for any of it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { rawExchange } from "../helpers/raw-http.ts";

const KEY = "sk-fuzz-key-0123456789";
const ADMIN_TOKEN = "fuzz-admin-token-0123456789";
const tmp = mkdtempSync(join(tmpdir(), "fuzz-"));
let gw: Gateway;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    {
      data_dir: join(tmp, "data"),
      endpoints: [{ id: "sim", url: sim.api }],
      auth: { keys: [{ key: KEY, tenant: "t" }] },
      admin: { token: ADMIN_TOKEN },
      fleet: { registration_token: "fuzz-registration-token-0123" },
    },
    1,
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
  rmSync(tmp, { recursive: true, force: true });
});

const A = `Authorization: Bearer ${KEY}\r\n`;
const post = (path: string, body: string, auth = A, type = "application/json") =>
  `POST ${path} HTTP/1.1\r\nHost: x\r\n${auth}Content-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body, "latin1")}\r\n\r\n${body}`;
const chat = (body: string) => post("/v1/chat/completions", body);
const msg = '"messages":[{"role":"user","content":"hi"}]';

const DATA_PLANE: [string, string][] = [
  ["request line garbage", "GARBAGE\r\n\r\n"],
  ["unknown HTTP version", "GET /health HTTP/9.9\r\nHost: x\r\n\r\n"],
  ["unknown method", "BREW /v1/chat/completions HTTP/1.1\r\nHost: x\r\n\r\n"],
  ["HTTP/1.1 without Host", "GET /health HTTP/1.1\r\n\r\n"],
  ["header without colon", "GET /health HTTP/1.1\r\nHost: x\r\nbroken\r\n\r\n"],
  ["Content-Length not a number", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Content-Length: abc\r\n\r\n{}`],
  ["Content-Length negative", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Content-Length: -5\r\n\r\n{}`],
  ["two Content-Lengths", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`],
  ["Content-Length past 2^64", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Content-Length: 99999999999999999999\r\n\r\n{}`],
  ["chunk size not hex", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`],
  ["chunk shorter than its size", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Transfer-Encoding: chunked\r\n\r\n5\r\n{}\r\n0\r\n\r\n`],
  ["not JSON", chat("{not json")],
  ["invalid UTF-8", chat("\xff\xfe{}")],
  ["JSON array", chat("[1,2]")],
  ["JSON null", chat("null")],
  ["JSON string", chat('"x"')],
  ["model a number", chat(`{"model":5,${msg}}`)],
  ["messages a string", chat('{"model":"m","messages":"hi"}')],
  ["messages [null]", chat('{"model":"m","messages":[null]}')],
  ["content an object", chat('{"model":"m","messages":[{"role":"user","content":{"a":1}}]}')],
  ["content parts of wrong types", chat('{"model":"m","messages":[{"role":"user","content":[1,null,{"type":"text","text":5}]}]}')],
  ["max_tokens a string", chat(`{"model":"m",${msg},"max_tokens":"5"}`)],
  ["max_tokens 1e308", chat(`{"model":"m",${msg},"max_tokens":1e308}`)],
  ["n a string", chat(`{"model":"m",${msg},"n":"2"}`)],
  ["stream a string", chat(`{"model":"m",${msg},"stream":"yes"}`)],
  ["stream_options a number", chat(`{"model":"m",${msg},"stream":true,"stream_options":5}`)],
  ["prompt an object", post("/v1/completions", '{"model":"m","prompt":{"x":[1,2]}}')],
  ["prompt token ids of wrong types", post("/v1/completions", '{"model":"m","prompt":[[1,"a",null]]}')],
  ["embeddings input a number", post("/v1/embeddings", '{"model":"m","input":12345}')],
  ["Idempotency-Key with control bytes", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n${A}Idempotency-Key: \x01\x02\r\nContent-Length: 2\r\n\r\n{}`],
  ["multipart without parts", post("/v1/files", "--zz\r\nbad\r\n", A, "multipart/form-data; boundary=zz")],
  ["upload as JSON", post("/v1/files", "{}")],
  ["batch body an array", post("/v1/batches", "[1,2]")],
  ["batch fields of wrong types", post("/v1/batches", '{"input_file_id":null,"endpoint":5,"completion_window":{}}')],
  ["file id with NUL", `GET /v1/files/%00%ff HTTP/1.1\r\nHost: x\r\n${A}\r\n`],
  ["dot segments", `GET /v1/files/../../etc/passwd/content HTTP/1.1\r\nHost: x\r\n${A}\r\n`],
  ["empty bearer", `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer\r\nContent-Length: 2\r\n\r\n{}`],
];

const ADMIN_AUTH = `Authorization: Bearer ${ADMIN_TOKEN}\r\n`;
const adminWrite = (method: string, path: string, body: string, type = "application/json") =>
  `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${ADMIN_AUTH}Content-Type: ${type}\r\nContent-Length: ${Buffer.byteLength(body, "latin1")}\r\n\r\n${body}`;

const ADMIN: [string, string][] = [
  ["HTTP/1.0 unknown path", "GET /nope HTTP/1.0\r\n\r\n"],
  ["request line garbage", "GARBAGE\r\n\r\n"],
  ["model not JSON", adminWrite("PUT", "/admin/v1/fleet/models/x", "{bad")],
  ["model null", adminWrite("PUT", "/admin/v1/fleet/models/x", "null")],
  ["model fields of wrong types", adminWrite("PUT", "/admin/v1/fleet/models/x", '{"name":5,"engine":"sim","replicas":"a"}')],
  ["patch of a missing model", adminWrite("PATCH", "/admin/v1/fleet/models/x", '{"replicas":1}')],
  ["cordon reason a number", adminWrite("POST", "/admin/v1/fleet/nodes/x/cordon", '{"reason":5}')],
  ["cordon as a form", adminWrite("POST", "/admin/v1/fleet/nodes/x/cordon", "a=b", "application/x-www-form-urlencoded")],
  ["drain grace negative", adminWrite("POST", "/admin/v1/fleet/nodes/x/drain", '{"grace_ms":-1}')],
  ["cordon body not JSON", adminWrite("POST", "/admin/v1/fleet/nodes/x/cordon", "{bad")],
  [
    "registration an array",
    `POST /admin/v1/fleet/register HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer fuzz-registration-token-0123\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n[1,2]`,
  ],
  ["node name with NUL", `GET /admin/v1/fleet/nodes/%00%ff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`],
  [
    "chunk size not hex",
    `POST /admin/v1/fleet/nodes/x/cordon HTTP/1.1\r\nHost: 127.0.0.1\r\n${ADMIN_AUTH}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`,
  ],
];

async function fuzz(url: string, cases: [string, string][]): Promise<string[]> {
  const wrong: string[] = [];
  for (const [what, payload] of cases) {
    const r = await rawExchange(url, Buffer.from(payload, "latin1"), { waitMs: 5_000, expect: 1 });
    const res = r.responses[0];
    if (res === undefined) {
      // Only Bun's parser may refuse without a word, and then it closes at once.
      if (r.closedAfterMs === undefined) wrong.push(`${what}: no answer and the connection held open`);
      continue;
    }
    if (res.status === 500 || res.status < 400) {
      wrong.push(`${what}: HTTP ${res.status} ${res.body.slice(0, 120)}`);
      continue;
    }
    if (res.headers["content-type"]?.startsWith("application/json")) {
      const e = (JSON.parse(res.body) as { error?: { message?: unknown; type?: unknown; code?: unknown } }).error;
      if (typeof e?.message !== "string" || typeof e.type !== "string" || typeof e.code !== "string")
        wrong.push(`${what}: not OpenAI-shaped: ${res.body.slice(0, 120)}`);
      if (res.status >= 500) wrong.push(`${what}: HTTP ${res.status} from a handler`);
    } else if (res.body !== "" || r.closedAfterMs === undefined) {
      wrong.push(`${what}: HTTP ${res.status} neither OpenAI-shaped nor Bun's bare refusal: ${JSON.stringify(res.body.slice(0, 80))}`);
    }
  }
  return wrong;
}

test("the data plane answers every malformed request with a 4xx, never a 500", async () => {
  expect(await fuzz(gw.api, DATA_PLANE)).toEqual([]);
}, 120_000);

test("the admin listener answers every malformed request with a 4xx, never a 500", async () => {
  expect(await fuzz(gw.admin, ADMIN)).toEqual([]);
}, 60_000);

test("a management change of something missing says what is missing, not that the route is", async () => {
  const r = await rawExchange(gw.admin, adminWrite("PATCH", "/admin/v1/fleet/models/absent-model", '{"replicas":1}'), { expect: 1 });
  expect(r.responses[0]?.status).toBe(404);
  expect(JSON.parse(r.responses[0]!.body).error.message).toBe("no model named 'absent-model'");
});

test("none of it is logged as an error, and the gateway still serves", async () => {
  expect(
    gw
      .output()
      .split("\n")
      .filter((l) => /"level":(50|60)/.test(l)),
  ).toEqual([]);
  const ok = await fetch(`${gw.api}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: "m", max_tokens: 2, messages: [{ role: "user", content: "hi" }] }),
  });
  expect(ok.status).toBe(200);
});
