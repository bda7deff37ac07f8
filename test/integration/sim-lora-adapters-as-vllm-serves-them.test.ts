/**
 * The sim-engine serves LoRA adapters as vLLM does: --lora-modules in both
 * forms, adapters in /v1/models with root and parent, a request naming an
 * adapter served by the base with it (chat, completions and the Responses
 * API), the runtime load/unload routes only
 * with VLLM_ALLOW_RUNTIME_LORA_UPDATING, and vllm:lora_requests_info.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parsePrometheusText } from "../../src/engines/prom-text.ts";
import { startLlmgw, stopAll } from "../helpers/processes.ts";

afterAll(stopAll);

const json = (url: string, body: unknown) => fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("sim-engine LoRA adapters", () => {
  test("adapters in /v1/models with parent and root, served by name, refused when unknown", async () => {
    const dir = mkdtempSync(join(tmpdir(), "llmgw-lora-"));
    mkdirSync(join(dir, "r8"));
    writeFileSync(join(dir, "r8", "adapter_config.json"), JSON.stringify({ r: 8, target_modules: ["q_proj", "v_proj"] }));
    const sim = await startLlmgw([
      "sim-engine",
      "--port",
      "0",
      "--model",
      "org/base",
      "--model",
      "alias",
      "--itl-ms",
      "2",
      "--enable-lora",
      "--max-loras",
      "2",
      "--max-cpu-loras",
      "4",
      "--lora-modules",
      "sql=/adapters/sql",
      `small=${join(dir, "r8")}`,
      '{"name":"chat","path":"/adapters/chat","base_model_name":"alias"}',
    ]);
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as {
      data: { id: string; root: string; parent: string | null; max_model_len: number | null }[];
    };
    expect(models.data.map((m) => [m.id, m.parent])).toEqual([
      ["org/base", null],
      ["alias", null],
      ["sql", "org/base"],
      ["small", "org/base"],
      ["chat", "alias"],
    ]);
    expect(models.data[2]).toMatchObject({ root: "/adapters/sql", max_model_len: null });

    const res = await json(`${sim.url}/v1/chat/completions`, { model: "sql", messages: [{ role: "user", content: "hi" }], max_tokens: 3 });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { model: string }).model).toBe("sql");
    const unknown = await json(`${sim.url}/v1/chat/completions`, { model: "nope", messages: [{ role: "user", content: "hi" }] });
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: { type: string } }).error.type).toBe("NotFoundError");

    const state = (await (await fetch(`${sim.url}/sim/state`)).json()) as {
      lora: { registered: { name: string; rank: number }[]; on_gpu: string[]; gpu_loads: number };
    };
    expect(state.lora.registered.find((a) => a.name === "small")!.rank).toBe(8);
    expect(state.lora.on_gpu).toEqual(["sql"]);
    expect(state.lora.gpu_loads).toBe(1);

    // The Responses API takes an adapter too, and runs with it (it is copied into the second slot); /tokenize knows its name.
    const responses = await json(`${sim.url}/v1/responses`, { model: "chat", input: "hi", max_output_tokens: 3 });
    expect(responses.status).toBe(200);
    expect(((await responses.json()) as { model: string }).model).toBe("chat");
    const afterResponses = (await (await fetch(`${sim.url}/sim/state`)).json()) as { lora: { on_gpu: string[]; gpu_loads: number } };
    expect(afterResponses.lora.on_gpu.sort()).toEqual(["chat", "sql"]);
    expect(afterResponses.lora.gpu_loads).toBe(2);
    expect((await json(`${sim.url}/v1/responses`, { model: "nope", input: "hi" })).status).toBe(404);
    expect((await json(`${sim.url}/tokenize`, { model: "sql", prompt: "hello there" })).status).toBe(200);

    // Without VLLM_ALLOW_RUNTIME_LORA_UPDATING the routes do not exist.
    const load = await json(`${sim.url}/v1/load_lora_adapter`, { lora_name: "x", lora_path: "/x" });
    expect(load.status).toBe(404);
    expect(await load.json()).toEqual({ detail: "Not Found" });
    await sim.stop();
  });

  test("runtime load and unload with VLLM_ALLOW_RUNTIME_LORA_UPDATING, vLLM's answers, and the metric", async () => {
    const sim = await startLlmgw(["sim-engine", "--port", "0", "--model", "base", "--itl-ms", "2", "--enable-lora", "--max-loras", "2"], {
      env: { VLLM_ALLOW_RUNTIME_LORA_UPDATING: "True" },
    });
    const load = await json(`${sim.url}/v1/load_lora_adapter`, { lora_name: "sql", lora_path: "/adapters/sql" });
    expect(load.status).toBe(200);
    expect(await load.text()).toBe("Success: LoRA adapter 'sql' added successfully.");
    const again = await json(`${sim.url}/v1/load_lora_adapter`, { lora_name: "sql", lora_path: "/adapters/sql" });
    expect(again.status).toBe(400);
    expect(((await again.json()) as { error: { type: string; message: string } }).error).toMatchObject({
      type: "InvalidUserInput",
      message: expect.stringContaining("has already been loaded"),
    });
    const missing = await json(`${sim.url}/v1/load_lora_adapter`, { lora_name: "", lora_path: "/p" });
    expect(missing.status).toBe(400);
    const notJson = await fetch(`${sim.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" });
    expect(notJson.status).toBe(415);

    const served = await json(`${sim.url}/v1/completions`, { model: "sql", prompt: "hello", max_tokens: 2 });
    expect(served.status).toBe(200);
    const text = await (await fetch(`${sim.url}/metrics`)).text();
    const info = parsePrometheusText(text).samples.filter((s) => s.name === "vllm:lora_requests_info");
    expect(info.length).toBeGreaterThan(0);
    expect(info.every((s) => s.labels.max_lora === "2" && s.value > 1.7e9)).toBe(true);
    // The latest series (largest timestamp) is the idle engine after the request.
    const latest = info.reduce((a, b) => (b.value > a.value ? b : a));
    expect(latest.labels).toMatchObject({ running_lora_adapters: "", waiting_lora_adapters: "" });
    expect(info.some((s) => s.labels.running_lora_adapters === "sql")).toBe(true);

    const unload = await json(`${sim.url}/v1/unload_lora_adapter`, { lora_name: "sql" });
    expect(await unload.text()).toBe("Success: LoRA adapter 'sql' removed successfully.");
    const gone = await json(`${sim.url}/v1/unload_lora_adapter`, { lora_name: "sql" });
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { message: string } }).error.message).toBe("The lora adapter 'sql' cannot be found.");
    const after = await json(`${sim.url}/v1/completions`, { model: "sql", prompt: "hello", max_tokens: 2 });
    expect(after.status).toBe(404);
    await sim.stop();
  });

  test("bad LoRA flags are usage errors naming the flag", async () => {
    const run = async (args: string[]) => {
      const proc = Bun.spawn(["node", "bin/llmgw.mjs", "sim-engine", "--port", "0", "--model", "m", ...args], { stdout: "pipe", stderr: "pipe" });
      const err = await new Response(proc.stderr).text();
      return { code: await proc.exited, err };
    };
    const noEnable = await run(["--lora-modules", "a=/x"]);
    expect(noEnable.code).toBe(2);
    expect(noEnable.err).toContain("--enable-lora");
    const cpu = await run(["--enable-lora", "--max-loras", "4", "--max-cpu-loras", "2"]);
    expect(cpu.code).toBe(2);
    expect(cpu.err).toContain("max_cpu_loras (2) must be >= max_loras (4)");
  });
});
