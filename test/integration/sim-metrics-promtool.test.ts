/**
 * Every /metrics flavor and the DCGM listener pass `promtool check metrics`.
 * Engine names may draw only what vLLM's own names draw: the ':' complaint,
 * and vLLM's histogram `vllm:iteration_tokens_total` the "_total" one.
 */
import { afterAll, expect } from "bun:test";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { type Started, startLlmgw, stopAll } from "../helpers/processes.ts";
import { testWithTool } from "../helpers/system-tools.ts";

afterAll(stopAll);

async function promtool(tool: string, text: string): Promise<{ code: number; complaints: string[] }> {
  const proc = Bun.spawn([tool, "check", "metrics"], { stdin: new TextEncoder().encode(text), stdout: "pipe", stderr: "pipe" });
  const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
  return { code: await proc.exited, complaints: out.split("\n").filter((l) => l.trim() !== "") };
}

async function exercise(sim: Started, model = "org/m"): Promise<void> {
  const post = (body: unknown) =>
    fetch(`${sim.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) }).then((r) => r.text());
  await Promise.all([
    post({ model, prompt: "hello ".repeat(30), max_tokens: 3 }),
    post({ model: "org/m", prompt: "hello ".repeat(30), max_tokens: 3, stream: true }),
  ]);
}

/** What promtool says of vLLM's own names, which the sim keeps as vLLM spells them. */
const VLLM_OWN_NAMES = [/ metric names should not contain ':'$/, /^vllm:iteration_tokens_total non-counter metrics should not have "_total" suffix$/];

for (const flavor of ["vllm-v1", "vllm-v0", "sglang"]) {
  testWithTool("promtool", `${flavor} /metrics: promtool finds nothing but what vLLM's own names draw`, async (tool) => {
    // vLLM flavors with a LoRA adapter, so vllm:lora_requests_info is checked too.
    const lora = flavor === "sglang" ? [] : ["--enable-lora", "--lora-modules", "sql=/adapters/sql"];
    const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "org/m", "--itl-ms", "2", "--metrics-flavor", flavor, ...lora]);
    await exercise(sim, lora.length > 0 ? "sql" : "org/m");
    const res = await fetch(`${sim.url}/metrics`);
    expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
    const text = await res.text();
    expect(parsePrometheusText(text).malformed).toBe(0);
    if (lora.length > 0) expect(text).toContain('vllm:lora_requests_info{max_lora="1",running_lora_adapters="sql"');
    const { complaints } = await promtool(tool, text);
    const other = complaints.filter((l) => !VLLM_OWN_NAMES.some((re) => re.test(l)));
    expect(other).toEqual([]);
    await sim.stop();
  });
}

testWithTool("promtool", "DCGM /metrics passes promtool outright and follows /sim/config GPU faults", async (tool) => {
  // The promtool-clean variant, restated: the default now writes dcgm-exporter's own labels (modelName), which promtool flags.
  const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "org/m", "--gpus", "2", "--dcgm-port", "0", "--dcgm-model-label", "DCGM_FI_DEV_NAME"], {
    waitFor: 2,
  });
  const dcgm = sim.urls.dcgm!;
  expect(dcgm).toBeDefined();
  const before = await (await fetch(`${dcgm}/metrics`)).text();
  const check = await promtool(tool, before);
  expect(check.complaints).toEqual([]);
  expect(check.code).toBe(0);

  const set = (body: unknown) =>
    fetch(`${sim.url}/sim/config`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  expect((await set({ gpus: [{ index: 1, xid_errors: 79, temperature_c: 97, ecc_dbe_volatile_total: 3 }] })).status).toBe(200);
  expect((await set({ gpus: [{ index: 5, xid_errors: 79 }] })).status).toBe(400);
  const after = parsePrometheusText(await (await fetch(`${dcgm}/metrics`)).text()).samples;
  const v = (name: string, gpu: string) => after.find((s) => s.name === name && s.labels.gpu === gpu)!.value;
  expect(v("DCGM_FI_DEV_XID_ERRORS", "1")).toBe(79);
  expect(v("DCGM_FI_DEV_GPU_TEMP", "1")).toBe(97);
  expect(v("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "1")).toBe(3);
  expect(v("DCGM_FI_DEV_XID_ERRORS", "0")).toBe(0);
  const labels = after.find((s) => s.name === "DCGM_FI_DEV_GPU_UTIL")!.labels;
  expect(labels.device).toBe("nvidia0");
  expect(labels.DCGM_FI_DEV_NAME).toBe("NVIDIA H100 80GB HBM3");
  // Utilisation follows the engine's load.
  const stream = fetch(`${sim.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "org/m", prompt: "x", max_tokens: 50, stream: true }),
  });
  const res = await stream;
  const reader = res.body!.getReader();
  // Past the comment that flushes the headers, to the first token: a step has run.
  for (let seen = ""; !seen.includes("data: "); ) seen += new TextDecoder().decode((await reader.read()).value ?? new Uint8Array());
  const busy = parsePrometheusText(await (await fetch(`${dcgm}/metrics`)).text()).samples;
  expect(busy.find((s) => s.name === "DCGM_FI_DEV_GPU_UTIL")!.value).toBeGreaterThan(0);
  // vLLM reserves its memory at start: FB_USED stays at the reservation under load (it followed the KV cache before).
  expect(busy.find((s) => s.name === "DCGM_FI_DEV_FB_USED")!.value).toBe(after.find((s) => s.name === "DCGM_FI_DEV_FB_USED")!.value);
  expect(busy.find((s) => s.name === "DCGM_FI_DEV_FB_USED")!.value).toBe(Math.round(81559 * 0.9));
  await sim.stop();
});
