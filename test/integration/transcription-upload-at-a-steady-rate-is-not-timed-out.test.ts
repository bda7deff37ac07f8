/**
 * Scenario: a transcription's audio arrives at a steady rate that takes
 * several times body_read_timeout_ms (a 14 MiB file at 1 MiB/s against the
 * default 10 s, here scaled: 2 MiB at 512 KiB/s against 1 s). It used to get
 * 408 at the deadline, a fixed total; it now reads under the rule /v1/files
 * has (no pause of body_read_timeout_ms, and past it an average of at least
 * batch.upload_min_bytes_per_s) and is answered, its bytes intact.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Gateway, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";
import { openSocket, parseResponses } from "../helpers/raw-http.ts";

const BODY_READ_TIMEOUT_MS = 1_000;
/** 8× the minimum rate (64 KiB/s): a busy host that delays the sender's ticks does not bring it near the floor. */
const BYTES_PER_S = 512 * 1024;
const AUDIO_BYTES = 2 * 1024 * 1024;
let gw: Gateway;

beforeAll(async () => {
  const sim = await startSim(["--model", "m"]);
  gw = await startGateway(
    {
      endpoints: [{ id: "sim", url: sim.api }],
      data_dir: join(mkdtempSync(join(tmpdir(), "llmgw-steady-audio-")), "data"),
      body_read_timeout_ms: BODY_READ_TIMEOUT_MS,
      batch: { upload_min_bytes_per_s: 64 * 1024 },
    },
    1,
  );
}, 60_000);

afterAll(async () => {
  await stopAll();
});

function audioForm(): Buffer {
  const audio = Buffer.alloc(AUDIO_BYTES);
  for (let i = 0; i < audio.length; i++) audio[i] = (i * 31) % 251;
  const head = Buffer.from(
    '--XX\r\nContent-Disposition: form-data; name="model"\r\n\r\nm\r\n--XX\r\nContent-Disposition: form-data; name="file"; filename="speech.wav"\r\nContent-Type: audio/wav\r\n\r\n',
  );
  return Buffer.concat([head, audio, Buffer.from("\r\n--XX--\r\n")]);
}

/** Send `form` at a steady BYTES_PER_S on one connection; the answer, and how long sending took. */
async function sendSteadily(form: Buffer): Promise<{ status: number | undefined; body: string; sendMs: number }> {
  const sock = await openSocket(gw.api);
  let raw = "";
  let closed = false;
  sock.on("data", (d: Buffer) => (raw += d.toString("latin1")));
  sock.on("close", () => (closed = true));
  sock.on("error", () => {});
  sock.write(`POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${form.length}\r\n\r\n`);
  const t0 = performance.now();
  const tickMs = 100;
  const perTick = (BYTES_PER_S * tickMs) / 1000;
  let sent = 0;
  // Paced by the clock, not by the ticks: a late tick sends what was due, so the average stays BYTES_PER_S.
  while (sent < form.length && !closed) {
    await Bun.sleep(tickMs);
    const due = Math.min(form.length, Math.floor(((performance.now() - t0) / tickMs) * perTick));
    if (due > sent) {
      sock.write(form.subarray(sent, due));
      sent = due;
    }
  }
  const sendMs = performance.now() - t0;
  for (let i = 0; i < 300 && !closed && !/\r\n\r\n/.test(raw); i++) await Bun.sleep(100);
  for (let i = 0; i < 50 && !closed; i++) {
    const [r] = parseResponses(raw);
    if (r && r.body.length >= Number(r.headers["content-length"] ?? Infinity)) break;
    await Bun.sleep(100);
  }
  sock.destroy();
  const [answer] = parseResponses(raw);
  return { status: answer?.status, body: answer?.body ?? raw.slice(0, 300), sendMs };
}

test("a 2 MiB transcription sent at a steady 512 KiB/s (four times body_read_timeout_ms) is answered, not cut with 408", async () => {
  const form = audioForm();
  const steady = await sendSteadily(form);
  expect({ status: steady.status, body: steady.body.slice(0, 200) }).toEqual({ status: 200, body: expect.stringContaining('"text"') });
  expect(steady.sendMs).toBeGreaterThan(2 * BODY_READ_TIMEOUT_MS); // the scenario held: a fixed total would have cut it
  // The same form sent at once gets the same words: the slow one arrived intact.
  const atOnce = await fetch(`${gw.api}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": "multipart/form-data; boundary=XX" },
    body: form,
  });
  expect(atOnce.status).toBe(200);
  expect((JSON.parse(steady.body) as { text: string }).text).toBe(((await atOnce.json()) as { text: string }).text);
}, 60_000);
