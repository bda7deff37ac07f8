/**
 * Requests for a LoRA adapter go where it is loaded. Two sim-engines with
 * vLLM's LoRA flags, one GPU slot each (max_loras 1): `sql` is running on
 * the first (a long request sent to it directly), `chat` on the second.
 * Through the gateway, `sql` requests all land on the first and `chat`
 * requests on the second — elsewhere they would wait for a slot behind the
 * other adapter's request and cost a swap — and an adapter only one engine
 * lists goes there whatever it runs. The gateway reads which adapter runs
 * where from vllm:lora_requests_info, and which exist from /v1/models.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll, waitUntil } from "../helpers/processes.ts";

const BASE = "llama";
const common = ["--model", BASE, "--itl-ms", "5", "--enable-lora", "--max-loras", "1", "--max-cpu-loras", "4"];
let simA: Sim;
let simB: Sim;
let gw: Gateway;
const holders: Promise<Response>[] = [];
const holdAborts: AbortController[] = [];

async function served(sim: Sim): Promise<number> {
  return (await sim.state()).requests_total as number;
}

/** A long request straight to the engine: its adapter stays running there until aborted. */
function hold(sim: Sim, model: string): AbortController {
  const abort = new AbortController();
  holdAborts.push(abort);
  holders.push(
    fetch(`${sim.api}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "hold", max_tokens: 4000, ignore_eos: true, stream: true }),
      signal: abort.signal,
    }).catch(() => new Response(null)),
  );
  return abort;
}

let chatHolder: AbortController;

beforeAll(async () => {
  [simA, simB] = await Promise.all([
    startSim([...common, "--lora-modules", "sql=/adapters/sql", "chat=/adapters/chat"]),
    startSim([...common, "--lora-modules", "sql=/adapters/sql", "chat=/adapters/chat", "legal=/adapters/legal"]),
  ]);
  gw = await startGateway(
    {
      log_level: "warn",
      health: { poll_interval_ms: 50 },
      endpoints: [
        { id: "a", url: simA.api, models: [BASE] },
        { id: "b", url: simB.api, models: [BASE] },
      ],
    },
    2,
  );
  hold(simA, "sql");
  chatHolder = hold(simB, "chat");
  // The gateway has seen both adapters running (its /v1/models lists the adapters once polled).
  await waitUntil(
    async () => {
      const [a, b] = await Promise.all([simA.metrics(), simB.metrics()]);
      return a.includes('running_lora_adapters="sql"') && b.includes('running_lora_adapters="chat"');
    },
    { what: "adapters running" },
  );
  await Bun.sleep(300);
}, 60_000);

afterAll(async () => {
  for (const a of holdAborts) a.abort();
  await Promise.allSettled(holders);
  await stopAll();
});

test("each adapter's requests go to the engine where it runs; one listed by a single engine goes there", async () => {
  const client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: "unused" });
  const models = await client.models.list();
  expect(models.data.map((m) => m.id).sort()).toEqual(["chat", "legal", BASE, "sql"].sort());

  const before = { a: await served(simA), b: await served(simB) };
  for (let i = 0; i < 8; i++) {
    const r = await client.completions.create({ model: "sql", prompt: `question ${i}`, max_tokens: 3 });
    expect(r.model).toBe("sql");
  }
  const afterSql = { a: await served(simA), b: await served(simB) };
  expect(afterSql.a - before.a).toBe(8);
  expect(afterSql.b - before.b).toBe(0);

  for (let i = 0; i < 8; i++) {
    const stream = await client.chat.completions.create({ model: "chat", messages: [{ role: "user", content: `hello ${i}` }], max_tokens: 3, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text.length).toBeGreaterThan(0);
  }
  const afterChat = { a: await served(simA), b: await served(simB) };
  expect(afterChat.a - afterSql.a).toBe(0);
  expect(afterChat.b - afterSql.b).toBe(8);

  // Only the second engine lists `legal`: it goes there (once `chat` leaves its only slot, as vLLM's max_loras rule has it).
  chatHolder.abort();
  const legal = await client.completions.create({ model: "legal", prompt: "contract", max_tokens: 2 });
  expect(legal.model).toBe("legal");
  expect((await served(simB)) - afterChat.b).toBe(1);

  // An adapter nobody lists is an unknown model.
  const missing = await client.completions.create({ model: "missing-adapter", prompt: "x", max_tokens: 2 }).then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(missing).toBeInstanceOf(OpenAI.NotFoundError);

  // The engines swapped nothing in for these requests: each adapter stayed in its slot.
  const lora = async (sim: Sim) => (await sim.state()).lora as { gpu_loads: number; on_gpu: string[] };
  expect((await lora(simA)).gpu_loads).toBe(1);
  expect((await lora(simA)).on_gpu).toEqual(["sql"]);

  // The gateway exports what it knows of each endpoint's adapters.
  const metrics = await gw.metrics();
  expect(metrics).toContain('llmgw_endpoint_lora_adapters{endpoint="a",state="registered"} 2');
  expect(metrics).toContain('llmgw_endpoint_lora_adapters{endpoint="b",state="registered"} 3');
  expect(metrics).toContain('llmgw_endpoint_lora_slots{endpoint="a"} 1');
});
