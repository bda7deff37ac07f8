/**
 * The real `openai` npm client pointed at llmgw in front of two sim-engines:
 * chat and completions (stream and not), embeddings, the model list, and the
 * SDK's typed errors for 400 and 404.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

let sims: Sim[];
let gw: Gateway;
let client: OpenAI;

beforeAll(async () => {
  sims = await Promise.all([startSim(["--model", "sim-model", "--itl-ms", "2"]), startSim(["--model", "sim-model", "--itl-ms", "2"])]);
  gw = await startGateway(
    {
      models: [{ name: "sim-model", aliases: ["friendly"] }],
      endpoints: sims.map((s, i) => ({ id: `sim-${i}`, url: s.api })),
    },
    2,
  );
  client = new OpenAI({ baseURL: `${gw.api}/v1`, apiKey: "not-needed", maxRetries: 0 });
});

afterAll(stopAll);

describe("openai SDK against llmgw", () => {
  test("chat completion, non-streaming, with usage", async () => {
    const r = await client.chat.completions.create({ model: "sim-model", max_tokens: 5, messages: [{ role: "user", content: "hello" }] });
    expect(r.object).toBe("chat.completion");
    expect(r.choices[0]!.message.role).toBe("assistant");
    expect(r.choices[0]!.message.content!.length).toBeGreaterThan(0);
    expect(r.usage!.completion_tokens).toBe(5);
    expect(r.choices[0]!.finish_reason).toBe("length");
  });

  test("chat completion through an alias, streaming, without usage unless asked", async () => {
    const stream = await client.chat.completions.create({ model: "friendly", stream: true, max_tokens: 4, messages: [{ role: "user", content: "hi" }] });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    expect(chunks[0]!.choices[0]!.delta.role).toBe("assistant");
    expect(chunks.every((c) => c.choices.length > 0)).toBe(true); // no usage chunk leaked
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("length");
    // Every chunk names the model that answered, as OpenAI names the snapshot behind an alias.
    expect(new Set(chunks.map((c) => c.model))).toEqual(new Set(["sim-model"]));
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text.length).toBeGreaterThan(0);
  });

  test("streaming with include_usage ends with the usage chunk", async () => {
    const stream = await client.chat.completions.create({
      model: "sim-model",
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 3,
      messages: [{ role: "user", content: "count" }],
    });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage!.completion_tokens).toBe(3);
    expect(last.usage!.prompt_tokens).toBeGreaterThan(0);
  });

  test("completions, streaming and not", async () => {
    const r = await client.completions.create({ model: "sim-model", prompt: "Once upon a time", max_tokens: 4 });
    expect(r.object).toBe("text_completion");
    expect(r.choices[0]!.text.length).toBeGreaterThan(0);
    const stream = await client.completions.create({ model: "sim-model", prompt: "Once upon a time", max_tokens: 4, stream: true });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.text ?? "";
    expect(text.length).toBeGreaterThan(0);
  });

  test("embeddings are deterministic", async () => {
    const a = await client.embeddings.create({ model: "sim-model", input: "the same text" });
    const b = await client.embeddings.create({ model: "sim-model", input: "the same text" });
    expect(a.data[0]!.embedding.length).toBeGreaterThan(0);
    expect(a.data[0]!.embedding).toEqual(b.data[0]!.embedding);
  });

  test("model list has the served model and its alias", async () => {
    const ids = [];
    for await (const m of client.models.list()) ids.push(m.id);
    expect(ids).toContain("sim-model");
    expect(ids).toContain("friendly");
  });

  test("typed errors: 404 for an unknown model, 400 for a bad request", async () => {
    const caught = async (p: PromiseLike<unknown>) => {
      try {
        await p;
      } catch (err) {
        return err;
      }
      throw new Error("expected the SDK to throw");
    };
    const notFound = await caught(client.chat.completions.create({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }));
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError);
    expect((notFound as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("MODEL_NOT_FOUND");
    try {
      await client.chat.completions.create({ model: "sim-model", messages: [] });
      throw new Error("expected a 400");
    } catch (err) {
      expect(err).toBeInstanceOf(OpenAI.BadRequestError);
      const e = err as InstanceType<typeof OpenAI.BadRequestError>;
      expect(e.status).toBe(400);
      expect(e.code).toBe("INVALID_REQUEST");
      expect(e.param).toBe("messages");
    }
  });
});
