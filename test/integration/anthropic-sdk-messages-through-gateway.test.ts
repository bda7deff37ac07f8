/**
 * Anthropic's Messages API through llmgw with the real `@anthropic-ai/sdk`
 * client (its key sent as x-api-key), over a sim-engine that serves the API
 * as vLLM does and one that does not (--no-messages-api: FastAPI's 404, as
 * SGLang answers): a message, streaming and not (usage settled from the
 * API's own fields, TTFT at the first content_block_delta, the audit line and
 * the route's metrics); a tool use round trip; count_tokens; errors as the
 * SDK's typed errors (an unknown model is a NotFoundError, a wrong key an
 * AuthenticationError, a bad body a BadRequestError); and the same calls on
 * the engine without the API, translated to chat completions (and /tokenize)
 * once its 404 taught the gateway that it lacks the route; and a fallback
 * down a model's chain.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { auditLine, counterValue, type Gateway, type Sim, startGateway, startSim } from "../helpers/cluster.ts";
import { stopAll } from "../helpers/processes.ts";

const KEY = "sk-anthropic-tenant-0000";

let native: Sim;
let chatOnly: Sim;
let gw: Gateway;
let client: Anthropic;

const weather = {
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] },
};

beforeAll(async () => {
  [native, chatOnly] = await Promise.all([
    startSim(["--model", "m", "--itl-ms", "2", "--output-len", "12"]),
    startSim(["--model", "c", "--itl-ms", "2", "--output-len", "12", "--no-messages-api"]),
  ]);
  gw = await startGateway(
    {
      health: { poll_interval_ms: 100 },
      models: [{ name: "m" }, { name: "c" }, { name: "down" }, { name: "falls", fallback: ["c"] }],
      endpoints: [
        { id: "native", url: native.api, models: ["m"] },
        { id: "chat-only", url: chatOnly.api, models: ["c"] },
        // Nothing listens there: its model is configured but never ready.
        { id: "gone", url: "http://127.0.0.1:9", models: ["down", "falls"] },
      ],
      auth: { keys: [{ key: KEY, tenant: "a" }] },
    },
    2,
  );
  client = new Anthropic({ baseURL: gw.api, apiKey: KEY, maxRetries: 0 });
});

afterAll(async () => {
  await stopAll();
});

async function caught(p: PromiseLike<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("expected an error");
}

describe.each(["m", "c"])("model %s (c: translated to chat)", (model) => {
  test("a message, not streaming: a text block, end_turn, usage in the audit line and the route's metrics", async () => {
    const { data: msg, response } = await client.messages
      .create({ model, max_tokens: 50, system: "Be brief.", messages: [{ role: "user", content: "Tell me about the sea" }] })
      .withResponse();
    expect(msg.type).toBe("message");
    expect(msg.role).toBe("assistant");
    expect(msg.id).toStartWith("msg_");
    expect(msg.content).toHaveLength(1);
    expect(msg.content[0]!.type).toBe("text");
    expect(msg.stop_reason).toBe("end_turn");
    expect(msg.usage.output_tokens).toBe(12);
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    // The first message to the engine without the API: its 404 on /v1/messages, then the same engine in chat.
    expect(response.headers.get("x-llmgw-attempts")).toBe(model === "c" ? "2" : "1");
    const audit = await auditLine(gw, response.headers.get("x-request-id")!);
    expect(audit.route).toBe("/v1/messages");
    expect(audit.tokens).toEqual({ prompt: msg.usage.input_tokens, completion: 12 });
    expect(counterValue(await gw.metrics(), "llmgw_requests_total", { route: "messages", outcome: "ok" })).toBeGreaterThanOrEqual(1);
    // count_tokens counts the same prompt the message was charged for.
    const counted = await client.messages.countTokens({ model, system: "Be brief.", messages: [{ role: "user", content: "Tell me about the sea" }] });
    expect(counted.input_tokens).toBe(msg.usage.input_tokens);
  });

  test("streaming with the SDK's helper: text deltas add up to the final message, max_tokens, usage settled, TTFT recorded", async () => {
    const stream = client.messages.stream({ model, max_tokens: 5, messages: [{ role: "user", content: [{ type: "text", text: "Count the waves" }] }] });
    let text = "";
    stream.on("text", (delta) => {
      text += delta;
    });
    const final = await stream.finalMessage();
    expect(final.stop_reason).toBe("max_tokens");
    expect(final.usage.output_tokens).toBe(5);
    expect(final.usage.input_tokens).toBeGreaterThan(0);
    expect(final.content[0]!.type === "text" && final.content[0]!.text).toBe(text);
    expect(text.length).toBeGreaterThan(0);
    const requestId = (await stream.withResponse()).response.headers.get("x-request-id")!;
    const audit = await auditLine(gw, requestId);
    expect(audit.tokens).toEqual({ prompt: final.usage.input_tokens, completion: 5 });
    const durations = audit.durations_ms as { total: number; ttft: number | null };
    expect(durations.ttft).toBeNumber();
    expect(durations.ttft!).toBeLessThanOrEqual(durations.total);
    expect(audit.outcome).toBe("ok");
  });

  test("a tool use round trip: a forced call is a tool_use block; its tool_result answered with text", async () => {
    const question = { role: "user" as const, content: "What is the weather in Oslo?" };
    const call = await client.messages.create({ model, max_tokens: 100, tools: [weather], tool_choice: { type: "any" }, messages: [question] });
    expect(call.stop_reason).toBe("tool_use");
    const use = call.content.find((b) => b.type === "tool_use");
    expect(use?.type === "tool_use" && use.name).toBe("get_weather");
    expect(use?.type === "tool_use" && Object.keys(use.input as object)).toEqual(["city"]);
    const answer = await client.messages.create({
      model,
      max_tokens: 100,
      tools: [weather],
      messages: [
        question,
        { role: "assistant", content: call.content },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use!.type === "tool_use" ? use!.id : "", content: "Rain, 4 degrees" }] },
      ],
    });
    expect(answer.stop_reason).toBe("end_turn");
    expect(answer.content[0]!.type).toBe("text");
    expect(answer.usage.input_tokens).toBeGreaterThan(call.usage.input_tokens);
    // Streamed, the call arrives as input_json_delta pieces the SDK assembles.
    const streamed = await client.messages
      .stream({ model, max_tokens: 100, tools: [weather], tool_choice: { type: "tool", name: "get_weather" }, messages: [question] })
      .finalMessage();
    const streamedUse = streamed.content.find((b) => b.type === "tool_use");
    expect(streamedUse?.type === "tool_use" && Object.keys(streamedUse.input as object)).toEqual(["city"]);
    expect(streamed.stop_reason).toBe("tool_use");
  });
});

describe("errors in Anthropic's shape", () => {
  test("an unknown model is the SDK's NotFoundError (not_found_error)", async () => {
    const err = await caught(client.messages.create({ model: "no-such-model", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }));
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    const e = err as InstanceType<typeof Anthropic.NotFoundError>;
    expect(e.status).toBe(404);
    expect((e.error as { type: string; error: { type: string } }).type).toBe("error");
    expect((e.error as { error: { type: string } }).error.type).toBe("not_found_error");
  });

  test("a model with no ready endpoint is a 503 overloaded_error, Retry-After kept", async () => {
    const err = await caught(client.messages.create({ model: "down", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }));
    expect(err).toBeInstanceOf(Anthropic.InternalServerError);
    const e = err as InstanceType<typeof Anthropic.InternalServerError>;
    expect(e.status).toBe(503);
    expect((e.error as { error: { type: string; code: string } }).error).toMatchObject({ type: "overloaded_error", code: "NO_READY_ENDPOINT" });
    expect(e.headers?.get("retry-after")).not.toBeNull();
  });

  test("a wrong key is an AuthenticationError; a body without max_tokens a BadRequestError", async () => {
    const stranger = new Anthropic({ baseURL: gw.api, apiKey: "sk-wrong", maxRetries: 0 });
    const denied = await caught(stranger.messages.create({ model: "m", max_tokens: 5, messages: [{ role: "user", content: "hi" }] }));
    expect(denied).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(((denied as InstanceType<typeof Anthropic.AuthenticationError>).error as { error: { type: string } }).error.type).toBe("authentication_error");
    const res = await fetch(`${gw.api}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { type: string; error: { type: string; message: string } };
    expect(body.type).toBe("error");
    expect(body.error.type).toBe("invalid_request_error");
    expect(body.error.message).toContain("max_tokens");
  });
});

test("a model whose endpoints are down falls back down its chain, streaming, to a model served only in chat", async () => {
  const stream = client.messages.stream({ model: "falls", max_tokens: 4, messages: [{ role: "user", content: "hello" }] });
  const final = await stream.finalMessage();
  expect(final.usage.output_tokens).toBe(4);
  const { response } = await stream.withResponse();
  expect(response.headers.get("x-llmgw-endpoint")).toBe("chat-only");
  expect(response.headers.get("x-llmgw-model")).toBe("c");
});

test("the engine without the Messages API, once learned, is asked in chat at once", async () => {
  const res = await client.messages.create({ model: "c", max_tokens: 3, messages: [{ role: "user", content: "again" }] }).withResponse();
  expect(res.response.headers.get("x-llmgw-attempts")).toBe("1");
  expect(res.response.headers.get("x-llmgw-endpoint")).toBe("chat-only");
  expect(res.data.usage.output_tokens).toBe(3);
});
