/**
 * Scenario: concurrent transcription forms, each held whole until its
 * engine answers. They used to have no shared bound (40 concurrent 24 MiB
 * forms grew the gateway by 809 MB); they now count against the budget
 * /v1/files uploads have (batch.upload_memory_bytes), their declared length
 * at once: a form that does not fit gets 503 UPLOAD_BUDGET_EXHAUSTED with
 * Retry-After before a byte of it is read, and the connection closes; the
 * bytes come back when the held one is answered.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { counterValue, type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";
import { openSocket, parseResponses, rawExchange } from "../helpers/raw-http.ts";

/** The smallest budget the config allows; each form takes most of it. */
const BUDGET_BYTES = 1024 * 1024;
const AUDIO_BYTES = 700 * 1024;
const UPLOAD_MEMORY = "llmgw_upload_memory_bytes";
let gw: Gateway;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    {
      endpoints: [{ id: "sim", url: sim.api }],
      data_dir: join(mkdtempSync(join(tmpdir(), "llmgw-audio-budget-")), "data"),
      body_read_timeout_ms: 10_000,
      batch: { upload_memory_bytes: BUDGET_BYTES },
    },
    1,
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
});

function audioForm(): Buffer {
  const head = Buffer.from(
    '--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\nContent-Type: audio/wav\r\n\r\n',
  );
  return Buffer.concat([head, Buffer.alloc(AUDIO_BYTES, 9), Buffer.from("\r\n--XX--\r\n")]);
}

const requestHead = (length: number) =>
  `POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${length}\r\n\r\n`;

async function heldBytes(): Promise<number> {
  return counterValue(await gw.metrics(), UPLOAD_MEMORY);
}

test("a second form that does not fit beside one held is refused at once with 503 and Retry-After; the first is answered and its bytes come back", async () => {
  const form = audioForm();
  // The first form: its head and part of its body, then a pause (well under body_read_timeout_ms).
  const first = await openSocket(gw.api);
  let firstRaw = "";
  first.on("data", (d: Buffer) => (firstRaw += d.toString("latin1")));
  first.on("error", () => {});
  first.write(requestHead(form.length));
  first.write(form.subarray(0, 64 * 1024));
  await waitUntil(async () => (await heldBytes()) >= form.length || undefined, { timeoutMs: 5_000, what: "the first form's declared length to be held" });

  const second = await rawExchange(gw.api, Buffer.concat([Buffer.from(requestHead(form.length)), form]), { expect: 1, waitMs: 5_000 });
  const refused = second.responses[0];
  expect({ status: refused?.status, retryAfter: refused?.headers["retry-after"], connection: refused?.headers.connection }).toEqual({
    status: 503,
    retryAfter: "1",
    connection: "close",
  });
  expect((JSON.parse(refused!.body) as { error: { code: string } }).error.code).toBe("UPLOAD_BUDGET_EXHAUSTED");

  first.write(form.subarray(64 * 1024));
  await waitUntil(() => parseResponses(firstRaw)[0]?.body.includes('"text"') || undefined, { timeoutMs: 10_000, what: "the first form's answer" });
  first.destroy();
  expect(parseResponses(firstRaw)[0]?.status).toBe(200);

  // Given back once answered: the same form now fits.
  await waitUntil(async () => (await heldBytes()) === 0 || undefined, { timeoutMs: 5_000, what: "the held bytes to come back" });
  const again = await fetch(`${gw.api}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": "multipart/form-data; boundary=XX" },
    body: form,
  });
  expect(again.status).toBe(200);
  expect(await heldBytes()).toBe(0);
}, 60_000);

test("a form whose client leaves mid-body, or one refused as malformed, gives its bytes back", async () => {
  const form = audioForm();
  // Declared but never finished: the client leaves mid-body.
  const left = await openSocket(gw.api);
  left.on("error", () => {});
  left.write(requestHead(form.length));
  left.write(form.subarray(0, 32 * 1024));
  await waitUntil(async () => (await heldBytes()) > 0 || undefined, { timeoutMs: 5_000, what: "the form to be held" });
  left.destroy();
  await waitUntil(async () => (await heldBytes()) === 0 || undefined, { timeoutMs: 5_000, what: "the abandoned form's bytes to come back" });
  // A form without a model field: 400, and nothing stays held.
  const noModel = Buffer.from('--XX\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nabc\r\n--XX--\r\n');
  const res = await fetch(`${gw.api}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": "multipart/form-data; boundary=XX" },
    body: noModel,
  });
  expect(res.status).toBe(400);
  expect(((await res.json()) as { error: { param: string } }).error.param).toBe("model");
  expect(await heldBytes()).toBe(0);
}, 60_000);
