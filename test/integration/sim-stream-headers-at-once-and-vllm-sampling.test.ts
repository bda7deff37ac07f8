/**
 * Scenario: a client of the sim-engine sees vLLM's behaviour: stream headers
 * arrive before the first token (while a long prefill runs), n > 1 streams
 * every choice with its index and one usage chunk, a stop string ends a
 * stream with stop_reason, and one decoding request keeps DCGM's
 * utilisation near 100 % while the framebuffer stays at the reservation.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { type Started, startLlmgw, stopAll } from "../helpers/processes.ts";

let sim: Started;
beforeAll(async () => {
  // Flat prefill of 2 ms per token: a 1,000-token prompt takes ~2 s before its first token.
  sim = await startLlmgw(
    [
      "sim-engine",
      "--port",
      "0",
      "--model",
      "m",
      "--prefill-ms-per-token",
      "2",
      "--prefill-overhead-ms",
      "0",
      "--itl-ms",
      "10",
      "--gpus",
      "1",
      "--dcgm-port",
      "0",
    ],
    { waitFor: 2 },
  );
});
afterAll(stopAll);

const post = (path: string, body: unknown) =>
  fetch(`${sim.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

function dataEvents(text: string): Record<string, unknown>[] {
  return text
    .split("\n\n")
    .filter((e) => e.startsWith("data: {"))
    .map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
}

test("stream headers arrive at once; the first token only after the prefill", async () => {
  const t0 = performance.now();
  const res = await post("/v1/completions", { model: "m", prompt: "p".repeat(4000), max_tokens: 2, stream: true });
  const headersMs = performance.now() - t0;
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
  const text = await res.text();
  const firstTokenMs = performance.now() - t0;
  expect(headersMs).toBeLessThan(500);
  expect(firstTokenMs).toBeGreaterThan(1_500);
  expect(text.startsWith(": \n\n")).toBe(true);
  expect(dataEvents(text).length).toBe(2);
});

test("n = 3 streams every choice with its index, the role chunks first, one usage chunk counting all choices", async () => {
  const res = await post("/v1/chat/completions", {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    n: 3,
    max_tokens: 4,
    stream: true,
    stream_options: { include_usage: true },
  });
  type Chunk = {
    choices: { index: number; delta: { role?: string; content?: string }; finish_reason: string | null }[];
    usage: { prompt_tokens: number; completion_tokens: number } | null;
  };
  const events = dataEvents(await res.text()) as unknown as Chunk[];
  expect(events.slice(0, 3).map((e) => [e.choices[0]!.index, e.choices[0]!.delta.role])).toEqual([
    [0, "assistant"],
    [1, "assistant"],
    [2, "assistant"],
  ]);
  const tokens = events.filter((e) => e.choices.length === 1 && e.choices[0]!.delta.role === undefined);
  expect(tokens.length).toBe(12);
  expect([0, 1, 2].map((i) => tokens.filter((e) => e.choices[0]!.index === i && e.choices[0]!.finish_reason === "length").length)).toEqual([1, 1, 1]);
  const usage = events.at(-1)!.usage!;
  expect(usage.completion_tokens).toBe(12);
  expect(usage.prompt_tokens).toBe(Math.ceil("<|user|>\nhi\n<|assistant|>\n".length / 4));
  const json = (await (await post("/v1/completions", { model: "m", prompt: "x", n: 2, max_tokens: 3 })).json()) as {
    choices: { index: number }[];
    usage: { completion_tokens: number };
  };
  expect(json.choices.map((c) => c.index)).toEqual([0, 1]);
  expect(json.usage.completion_tokens).toBe(6);
});

test("a stop string ends the stream with finish_reason stop and stop_reason the string, never sending it", async () => {
  const body = { model: "m", prompt: "Once upon a time", max_tokens: 60, ignore_eos: true };
  const whole = ((await (await post("/v1/completions", body)).json()) as { choices: { text: string }[] }).choices[0]!.text;
  const stop = whole.split(" ")[8]!;
  const events = dataEvents(await (await post("/v1/completions", { ...body, stop: [stop], stream: true })).text()) as unknown as {
    choices: { text: string; finish_reason: string | null; stop_reason: string | null }[];
  }[];
  const last = events.at(-1)!.choices[0]!;
  expect([last.finish_reason, last.stop_reason]).toEqual(["stop", stop]);
  const streamed = events.map((e) => e.choices[0]!.text).join("");
  expect(streamed).toBe(whole.slice(0, whole.indexOf(stop)));
});

test("DCGM: one decoding request keeps utilisation near 100 %; the framebuffer stays at vLLM's reservation", async () => {
  const scrape = async () => parsePrometheusText(await (await fetch(`${sim.urls.dcgm}/metrics`)).text()).samples;
  const value = (s: Awaited<ReturnType<typeof scrape>>, name: string) => s.find((x) => x.name === name)!.value;
  await Bun.sleep(1_100); // a second with nothing running
  const idle = await scrape();
  expect(value(idle, "DCGM_FI_DEV_GPU_UTIL")).toBe(0);
  const res = await post("/v1/completions", { model: "m", prompt: "x", max_tokens: 200, ignore_eos: true, stream: true });
  const reader = res.body!.getReader();
  await Bun.sleep(1_100);
  const busy = await scrape();
  expect(value(busy, "DCGM_FI_DEV_GPU_UTIL")).toBeGreaterThanOrEqual(95);
  expect(value(busy, "DCGM_FI_DEV_FB_USED")).toBe(value(idle, "DCGM_FI_DEV_FB_USED"));
  const labels = busy.find((x) => x.name === "DCGM_FI_DEV_GPU_UTIL")!.labels;
  expect(Object.keys(labels).slice(0, 6)).toEqual(["gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname"]);
  await reader.cancel();
});
