/** The sim's forced tool calls (required, named) and its reading of Responses API requests, as vLLM validates and plans them. */
import { describe, expect, test } from "bun:test";
import { parseGenerationRequest } from "../../src/sim/openai-request.ts";
import { parseResponsesRequest } from "../../src/sim/routes/responses-request.ts";
import { argumentsText, forcedToolChoice, toolArguments } from "../../src/sim/routes/tool-calls.ts";
import { SimOutput } from "../../src/sim/text-model.ts";
import { SimHttpError } from "../../src/sim/vllm-errors.ts";

const limits = { models: ["m"], maxModelLen: 4096, blockSize: 16, outputLen: 20, outputLenDist: { kind: "fixed", tokens: 20 } as const };
const weather = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string" }, days: { type: "integer" }, unit: { enum: ["c", "f"] } }, required: ["city"] },
  },
};
const chat = (body: Record<string, unknown>) =>
  parseGenerationRequest("chat", JSON.stringify({ model: "m", messages: [{ role: "user", content: "weather?" }], tools: [weather], ...body }), limits);
const responses = (body: Record<string, unknown>) => parseResponsesRequest(JSON.stringify({ model: "m", input: "weather?", ...body }), limits);

function status(fn: () => unknown): number | undefined {
  try {
    fn();
  } catch (err) {
    return err instanceof SimHttpError ? err.status : undefined;
  }
  return undefined;
}

describe("sim tool calls", () => {
  test("required and a named function force a call whose arguments are valid JSON filling the parameters, deterministic per prompt", () => {
    const required = chat({ tool_choice: "required" }).choices[0]!;
    expect(required.tool!.name).toBe("get_weather");
    expect(required.tool!.finish).toBe("tool_calls");
    const args = JSON.parse(argumentsText(required.tool!, required.outputTokens)) as Record<string, unknown>;
    expect(Object.keys(args).sort()).toEqual(["city", "days", "unit"]);
    expect(typeof args.city).toBe("string");
    expect(Number.isInteger(args.days)).toBe(true);
    expect(["c", "f"]).toContain(args.unit as string);
    expect(required.outputTokens).toBe(required.tool!.pieces.length);
    const named = chat({ tool_choice: { type: "function", function: { name: "get_weather" } } }).choices[0]!;
    expect(named.tool!.finish).toBe("stop"); // vLLM streams a named call's finish_reason as the engine's
    expect(argumentsText(named.tool!, named.outputTokens)).toBe(argumentsText(required.tool!, required.outputTokens));
  });

  test("max_tokens cuts the arguments (finish length); auto and none answer with text", () => {
    const cut = chat({ tool_choice: "required", max_tokens: 2 }).choices[0]!;
    expect([cut.outputTokens, cut.finishReason]).toEqual([2, "length"]);
    expect(chat({ tool_choice: "auto" }).choices[0]!.tool).toBeUndefined();
    expect(chat({ tool_choice: "none" }).choices[0]!.tool).toBeUndefined();
  });

  test("vLLM's refusals: a named function not offered, required without tools, a malformed tool", () => {
    expect(status(() => chat({ tool_choice: { type: "function", function: { name: "nope" } } }))).toBe(400);
    expect(status(() => chat({ tools: undefined, tool_choice: "required" }))).toBe(400);
    expect(status(() => chat({ tools: [{ type: "function", function: {} }], tool_choice: "required" }))).toBe(400);
  });

  test("arguments for a schema-less function are an empty object; nested objects and arrays are filled", () => {
    expect(toolArguments(undefined, 1)).toBe("{}");
    const nested = JSON.parse(
      toolArguments(
        {
          type: "object",
          properties: { where: { type: "object", properties: { lat: { type: "number" } } }, tags: { type: "array", items: { type: "string" } } },
        },
        7,
      ),
    );
    expect(typeof nested.where.lat).toBe("number");
    expect(nested.tags.length).toBe(1);
    expect(forcedToolChoice({ tools: [{ type: "function", name: "flat", parameters: {} }], tool_choice: { type: "function", name: "flat" } })!.name).toBe(
      "flat",
    );
  });
});

describe("sim Responses requests", () => {
  test("instructions and input items become the prompt; max_output_tokens caps the answer (status incomplete)", () => {
    const short = responses({ max_output_tokens: 3 });
    expect([short.plan.outputTokens, short.plan.finishReason]).toEqual([3, "length"]);
    const withInstructions = responses({ instructions: "be brief", max_output_tokens: 3 });
    expect(withInstructions.plan.prompt.count).toBeGreaterThan(short.plan.prompt.count);
    const items = responses({ input: [{ role: "user", content: [{ type: "input_text", text: "weather?" }] }], max_output_tokens: 3 });
    expect(items.plan.prompt.state).toBe(short.plan.prompt.state); // the same conversation, however it is written
  });

  test("a partial assistant message last is continued exactly where the answer was (vLLM's should_continue_final_message)", () => {
    const plain = responses({ input: [{ role: "user", content: "weather?" }], max_output_tokens: 10 });
    const whole = new SimOutput(plain.plan.state);
    const delivered = whole.text(4);
    const partial = responses({
      input: [
        { role: "user", content: "weather?" },
        { type: "message", role: "assistant", status: "in_progress", content: [{ type: "output_text", text: delivered }] },
      ],
      max_output_tokens: 6,
    });
    expect(new SimOutput(partial.plan.state).text(6)).toBe(whole.text(10).slice(delivered.length));
    // A completed assistant message is history, not a prefill: a new turn starts after it.
    const done = responses({
      input: [
        { role: "user", content: "weather?" },
        { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: delivered }] },
      ],
    });
    expect(done.plan.prompt.state).not.toBe(partial.plan.prompt.state);
  });

  test("stateless like vLLM without its store: previous_response_id is a 404, background a 400; a forced call plans a function_call", () => {
    expect(status(() => responses({ previous_response_id: "resp_x" }))).toBe(404);
    expect(status(() => responses({ background: true }))).toBe(400);
    expect(status(() => responses({ input: undefined }))).toBe(400);
    expect(status(() => responses({ model: "other" }))).toBe(404);
    const call = responses({ tools: [{ type: "function", name: "get_weather", parameters: weather.function.parameters }], tool_choice: "required" });
    expect(call.plan.tool!.name).toBe("get_weather");
    expect(call.id).toMatch(/^resp_/);
    expect(responses({ request_id: "resp_given" }).id).toBe("resp_given");
  });
});
