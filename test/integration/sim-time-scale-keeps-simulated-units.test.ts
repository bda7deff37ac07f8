/**
 * Scenario: `--time-scale 20` runs the engine's clock 20 times faster: a
 * client sees 100 ms decode steps as ~5 ms gaps, while the engine's own
 * /metrics keep reporting simulated time (inter-token latency ~0.1 s).
 */
import { afterAll, expect, test } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { startLlmgw, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

test("a 20× clock: wall-clock gaps shrink 20×, the engine's histograms stay in simulated seconds", async () => {
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--itl-ms", "100", "--batch-slowdown", "0", "--time-scale", "20"]);
  const t0 = performance.now();
  const res = await fetch(`${sim.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt: "x", max_tokens: 40, ignore_eos: true }),
  });
  expect(res.status).toBe(200);
  await res.json();
  const wallMs = performance.now() - t0;
  // 39 gaps of 100 simulated ms = 3.9 s simulated, ~0.2 s on the wall (timers add a little).
  expect(wallMs).toBeLessThan(1_500);
  const samples = parsePrometheusText(await (await fetch(`${sim.url}/metrics`)).text()).samples;
  const sum = samples.find((s) => s.name === "vllm:inter_token_latency_seconds_sum")!.value;
  const count = samples.find((s) => s.name === "vllm:inter_token_latency_seconds_count")!.value;
  expect(count).toBe(39);
  expect(sum / count).toBeGreaterThan(0.09);
  expect(sum / count).toBeLessThan(0.13);
  const state = (await (await fetch(`${sim.url}/sim/state`)).json()) as { config: { time_scale: number } };
  expect(state.config.time_scale).toBe(20);
});

test("the served engine keeps the derived clock: a lone decode on the L4 × Qwen2.5-0.5B profile takes the profile's step time", async () => {
  const { resolveProfile } = await import("../../src/sim/profiles/catalog.ts");
  const { loneDecodeMs } = await import("../../src/sim/step-time.ts");
  const want = loneDecodeMs(resolveProfile({ profile: "l4-qwen2.5-0.5b" }).profile.cost);
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "m", "--profile", "l4-qwen2.5-0.5b"]);
  const res = await fetch(`${sim.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", prompt: "x", max_tokens: 150, ignore_eos: true }),
  });
  await res.json();
  const samples = parsePrometheusText(await (await fetch(`${sim.url}/metrics`)).text()).samples;
  const tpot = samples.find((s) => s.name === "vllm:request_time_per_output_token_seconds_sum")!.value * 1000;
  // The engine reports its own clock: timer lateness starts the next step late but never stretches a step.
  expect(tpot).toBeGreaterThan(want * 0.98);
  expect(tpot).toBeLessThan(want * 1.25);
});
