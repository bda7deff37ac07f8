/** The sim-engine's reading of Anthropic Messages API requests: the prompt as the chat template renders it, forced tool calls, stop sequences, and vLLM's refusals. */
import { describe, expect, test } from "bun:test";
import { countMessageTokens, parseMessagesRequest } from "../../src/sim/routes/messages-request.ts";
import { SimHttpError } from "../../src/sim/vllm-errors.ts";

const limits = { models: ["m"], maxModelLen: 4096, blockSize: 16, outputLen: 20, outputLenDist: { kind: "fixed", tokens: 20 } as const };
const weather = { name: "get_weather", input_schema: { type: "object", properties: { city: { type: "string" } } } };
const messages = (body: Record<string, unknown>) =>
  parseMessagesRequest(JSON.stringify({ model: "m", max_tokens: 100, messages: [{ role: "user", content: "weather?" }], ...body }), limits);

function status(fn: () => unknown): number | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof SimHttpError ? err.status : undefined;
  }
  return undefined;
}

describe("sim Messages requests", () => {
  test("the system prompt, as a string or text blocks, is part of the prompt; count_tokens counts the same prompt", () => {
    const bare = messages({});
    const asString = messages({ system: "You are terse." });
    const asBlocks = messages({
      system: [
        { type: "text", text: "You are " },
        { type: "text", text: "terse." },
      ],
    });
    expect(asString.promptTokens).toBeGreaterThan(bare.promptTokens);
    expect(asBlocks.promptTokens).toBe(asString.promptTokens);
    const counted = countMessageTokens(JSON.stringify({ model: "m", system: "You are terse.", messages: [{ role: "user", content: "weather?" }] }), limits);
    expect(counted).toBe(asString.promptTokens);
  });

  test("tool_use and tool_result blocks are read into the prompt", () => {
    const turn = messages({
      tools: [weather],
      messages: [
        { role: "user", content: "weather?" },
        { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Oslo" } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: [{ type: "text", text: "rain, 4 degrees" }] }] },
      ],
    });
    expect(turn.promptTokens).toBeGreaterThan(messages({}).promptTokens + 5);
    expect(turn.plan.tool).toBeUndefined();
  });

  test("tool_choice any or a named tool forces a call whose arguments fill the schema; auto answers with text", () => {
    const any = messages({ tools: [weather], tool_choice: { type: "any" } });
    expect(any.plan.tool?.name).toBe("get_weather");
    expect(Object.keys(JSON.parse(any.plan.tool!.pieces.join("")))).toEqual(["city"]);
    expect(messages({ tools: [weather], tool_choice: { type: "tool", name: "get_weather" } }).plan.tool?.name).toBe("get_weather");
    expect(messages({ tools: [weather], tool_choice: { type: "auto" } }).plan.tool).toBeUndefined();
  });

  test("vLLM's refusals: max_tokens missing or not positive, an unknown model, a tool_choice naming no tool, a bad block type", () => {
    expect(status(() => parseMessagesRequest(JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }), limits))).toBe(400);
    expect(status(() => messages({ max_tokens: 0 }))).toBe(400);
    expect(status(() => messages({ model: "nope" }))).toBe(404);
    expect(status(() => messages({ messages: [] }))).toBe(400);
    expect(status(() => messages({ tools: [weather], tool_choice: { type: "tool" } }))).toBe(400);
    expect(status(() => messages({ tools: [weather], tool_choice: { type: "tool", name: "other" } }))).toBe(400);
    expect(status(() => messages({ messages: [{ role: "user", content: [{ type: "video" }] }] }))).toBe(400);
  });
});
