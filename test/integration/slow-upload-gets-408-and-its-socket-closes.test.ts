/**
 * Scenario: a client drips its request body (2 KiB/s, 32 KiB/s) on every
 * route that reads one. An upload to /v1/files used to get 500 "Unexpected
 * end of file" without `connection: close` and its socket stayed open for
 * minutes; a refused batch creation also left its socket draining. Now each
 * route reads under the same rule (a pause of body_read_timeout_ms, or an
 * average under batch.upload_min_bytes_per_s once that has passed): 408
 * BODY_READ_TIMEOUT in OpenAI's shape, `connection: close`, and the socket
 * closed right after the answer while the client is still sending.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { openSocket, parseResponses } from "../helpers/raw-http.ts";

const KEY = "sk-slow-upload-0123456789";
/** Small deadlines so each drip is cut within seconds. */
const BODY_READ_TIMEOUT_MS = 1_000;
const MIN_BYTES_PER_S = 64 * 1024;
/** A drip the gateway never cuts is given up on after this: the test then fails on its status. */
const GIVE_UP_MS = 20_000;
let gw: Gateway;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    {
      endpoints: [{ id: "sim", url: sim.api }],
      auth: { keys: [{ key: KEY, tenant: "t" }] },
      data_dir: join(mkdtempSync(join(tmpdir(), "llmgw-slow-upload-")), "data"),
      body_read_timeout_ms: BODY_READ_TIMEOUT_MS,
      batch: { upload_min_bytes_per_s: MIN_BYTES_PER_S },
    },
    1,
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
});

interface Drip {
  status: number | undefined;
  headers: Record<string, string>;
  body: string;
  /** ms from the request's head to the answer's first byte, and to the server's close. */
  answeredAtMs: number | undefined;
  closedAtMs: number | undefined;
}

/** Send a request head declaring `declared` bytes, then `prefix`, then spaces at `bytesPerS` until the server closes (or GIVE_UP_MS). */
async function drip(path: string, contentType: string, prefix: string, declared: number, bytesPerS: number, extraHeaders = ""): Promise<Drip> {
  const sock = await openSocket(gw.api);
  const t0 = performance.now();
  let raw = "";
  let answeredAtMs: number | undefined;
  let closedAtMs: number | undefined;
  sock.on("data", (d: Buffer) => {
    answeredAtMs ??= performance.now() - t0;
    raw += d.toString("latin1");
  });
  const closed = () => (closedAtMs ??= performance.now() - t0);
  sock.on("end", closed);
  sock.on("close", closed);
  sock.on("error", () => {});
  sock.write(
    `POST ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Type: ${contentType}\r\nContent-Length: ${declared}\r\n${extraHeaders}\r\n${prefix}`,
  );
  let sent = prefix.length;
  const tickMs = 100;
  const perTick = Math.max(1, Math.round((bytesPerS * tickMs) / 1000));
  while (closedAtMs === undefined && performance.now() - t0 < GIVE_UP_MS) {
    await Bun.sleep(tickMs);
    if (closedAtMs !== undefined || sock.destroyed) break;
    const n = Math.min(perTick, declared - sent - 1); // never the whole body: it must be cut
    if (n > 0) {
      sock.write(Buffer.alloc(n, 0x20));
      sent += n;
    }
  }
  sock.destroy();
  const [answer] = parseResponses(raw);
  return { status: answer?.status, headers: answer?.headers ?? {}, body: answer?.body ?? "", answeredAtMs, closedAtMs };
}

const chatPrefix = '{"model":"m","messages":[{"role":"user","content":"hi"}]';
const filePrefix =
  '--XX\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\nContent-Type: application/jsonl\r\n\r\n';
const audioPrefix =
  '--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n';
const MULTIPART = "multipart/form-data; boundary=XX";

function expectCutWith408(what: string, d: Drip): void {
  expect({ what, status: d.status, connection: d.headers.connection }).toEqual({ what, status: 408, connection: "close" });
  const error = (JSON.parse(d.body) as { error: { code: string; type: string; message: string } }).error;
  expect({ what, code: error.code, type: error.type }).toEqual({ what, code: "BODY_READ_TIMEOUT", type: "timeout_error" });
  // Closed with the answer, while the client was still sending (margin for a busy host; it was ~128 s).
  expect({ what, closed: d.closedAtMs !== undefined }).toEqual({ what, closed: true });
  expect(d.closedAtMs! - d.answeredAtMs!).toBeLessThan(3_000);
}

test("a 2 KiB/s and a 32 KiB/s upload to /v1/files get 408 with connection: close, and the socket closes", async () => {
  for (const rate of [2 * 1024, 32 * 1024]) {
    const d = await drip("/v1/files", MULTIPART, filePrefix, 8 * 1024 * 1024, rate);
    expectCutWith408(`/v1/files at ${rate} B/s`, d);
  }
  expect(gw.output()).not.toContain("Unexpected end of file");
}, 90_000);

test("every other route that reads a body cuts a drip the same way: chat, embeddings, responses, transcriptions, batches (with and without Idempotency-Key)", async () => {
  const cases: [string, string, string, string, number, string?][] = [
    ["/v1/chat/completions", "application/json", chatPrefix, "chat", 1024 * 1024],
    ["/v1/embeddings", "application/json", '{"model":"m","input":"', "embeddings", 1024 * 1024],
    ["/v1/responses", "application/json", '{"model":"m","input":"', "responses", 1024 * 1024],
    ["/v1/audio/transcriptions", MULTIPART, audioPrefix, "transcriptions", 8 * 1024 * 1024],
    ["/v1/batches", "application/json", "{", "batches", 60_000],
    ["/v1/batches", "application/json", "{", "batches with Idempotency-Key", 60_000, "Idempotency-Key: slow-1\r\n"],
  ];
  // All at once, each on its own socket: every drip is cut on its own clock.
  const drips = await Promise.all(cases.map(([path, type, prefix, , declared, extra]) => drip(path, type, prefix, declared, 2 * 1024, extra)));
  for (const [i, c] of cases.entries()) expectCutWith408(c[3], drips[i]!);
}, 120_000);

test("a batch creation refused before its body is read (declared over the limit) closes rather than drains", async () => {
  const d = await drip("/v1/batches", "application/json", "{", 8 * 1024 * 1024, 2 * 1024);
  expect({ status: d.status, connection: d.headers.connection }).toEqual({ status: 413, connection: "close" });
  expect(d.closedAtMs).toBeDefined();
  expect(d.closedAtMs! - d.answeredAtMs!).toBeLessThan(3_000);
}, 60_000);

test("the gateway logged no error for any of the drips and still answers", async () => {
  expect(
    gw
      .output()
      .split("\n")
      .filter((l) => /"level":(50|60)/.test(l)),
  ).toEqual([]);
  expect((await fetch(`${gw.api}/health`)).status).toBe(200);
});
