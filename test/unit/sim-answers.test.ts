/** What a request's choices answer, as vLLM's sampling parameters decide: max_tokens, ignore_eos, min_tokens, stop, n, batched prompts. */
import { describe, expect, test } from "bun:test";
import { parseGenerationRequest } from "../../src/sim/openai-request.ts";
import { DEFAULT_LENGTH_DISTRIBUTION, naturalLength, parseLengthDistribution } from "../../src/sim/output-length.ts";
import { SimOutput } from "../../src/sim/text-model.ts";

const limits = { models: ["m"], maxModelLen: 4096, blockSize: 16, outputLen: 20, outputLenDist: { kind: "fixed", tokens: 20 } as const };
const completion = (body: Record<string, unknown>) =>
  parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: "Tell me a story", ...body }), limits);

describe("sim answers", () => {
  test("max_tokens and max_completion_tokens cap the answer; without them it ends at its natural length with stop", () => {
    expect([completion({}).outputTokens, completion({}).finishReason]).toEqual([20, "stop"]);
    expect([completion({ max_tokens: 200 }).outputTokens, completion({ max_tokens: 200 }).finishReason]).toEqual([20, "stop"]);
    expect([completion({ max_tokens: 7 }).outputTokens, completion({ max_tokens: 7 }).finishReason]).toEqual([7, "length"]);
    expect(completion({ max_completion_tokens: 5, max_tokens: 9 }).outputTokens).toBe(5);
  });

  test("ignore_eos runs to max_tokens, or to the context left when nothing caps it", () => {
    expect([completion({ max_tokens: 200, ignore_eos: true }).outputTokens, completion({ max_tokens: 200, ignore_eos: true }).finishReason]).toEqual([
      200,
      "length",
    ]);
    const uncapped = completion({ ignore_eos: true });
    expect([uncapped.outputTokens, uncapped.finishReason]).toEqual([4096 - uncapped.prompt.count, "length"]);
  });

  test("min_tokens holds off the model's end, and must not exceed max_tokens", () => {
    expect([completion({ min_tokens: 30, max_tokens: 100 }).outputTokens, completion({ min_tokens: 30, max_tokens: 100 }).finishReason]).toEqual([30, "stop"]);
    expect(() => completion({ min_tokens: 30, max_tokens: 10 })).toThrow(/min_tokens must be less than or equal to max_tokens/);
  });

  test("a stop string ends the answer with stop_reason set, the string left out, and its text held back token by token", () => {
    const whole = new SimOutput(completion({}).prompt.state).text(20);
    // A stop string taken from the middle of the natural answer: the word starting at the 6th token.
    const words = whole
      .split(" ")
      .slice(1)
      .map((w) => ` ${w}`);
    const stop = words[5]!.trim();
    const a = completion({ stop: [stop, "never-there"] });
    const choice = a.choices[0]!;
    expect(choice.finishReason).toBe("stop");
    expect(choice.stopReason).toBe(stop);
    const cut = whole.indexOf(stop);
    expect(choice.texts!.join("")).toBe(whole.slice(0, cut));
    expect(choice.outputTokens).toBeLessThan(20);
    // No streamed piece ever contains the start of the stop string.
    expect(choice.texts!.some((t) => t.includes(stop))).toBe(false);
    const kept = completion({ stop, include_stop_str_in_output: true }).choices[0]!;
    expect(kept.texts!.join("")).toBe(whole.slice(0, cut + stop.length));
    // min_tokens beyond the stop's position: the stop is ignored until then.
    expect(completion({ stop, min_tokens: 19 }).choices[0]!.stopReason).not.toBe(stop);
  });

  test("n > 1 gives n choices, each its own sample, choice 0 the answer n = 1 gives", () => {
    const one = completion({ max_tokens: 12 });
    const three = completion({ max_tokens: 12, n: 3 });
    expect(three.choices.map((c) => c.index)).toEqual([0, 1, 2]);
    expect(three.choices[0]!.state).toBe(one.choices[0]!.state);
    const texts = three.choices.map((c) => new SimOutput(c.state).text(12));
    expect(new Set(texts).size).toBe(3);
  });

  test("a batch of completion prompts answers each, choices indexed prompt × n + sample; token-id prompts count one token per id", () => {
    const batch = parseGenerationRequest(
      "completion",
      JSON.stringify({ model: "m", prompt: ["first prompt", "second, longer prompt"], n: 2, max_tokens: 3 }),
      limits,
    );
    expect(batch.prompts.length).toBe(2);
    expect(batch.choices.map((c) => c.index)).toEqual([0, 1, 2, 3]);
    expect(batch.choices[2]!.prompt).toBe(batch.prompts[1]!);
    const ids = parseGenerationRequest(
      "completion",
      JSON.stringify({
        model: "m",
        prompt: [
          [1, 2, 3],
          [4, 5],
        ],
        max_tokens: 3,
      }),
      limits,
    );
    expect(ids.prompts.map((p) => p.count)).toEqual([3, 2]);
  });

  test("natural lengths are drawn per prompt, the same every time; the default has the trace's median", () => {
    expect(parseLengthDistribution("lognormal:129:0.94")).toEqual({ kind: "lognormal", median: 129, sigma: 0.94 });
    expect(parseLengthDistribution("40")).toEqual({ kind: "fixed", tokens: 40 });
    expect(() => parseLengthDistribution("normal:1")).toThrow(/expected/);
    const draws = Array.from({ length: 4001 }, (_, i) => naturalLength(DEFAULT_LENGTH_DISTRIBUTION, Math.imul(i + 1, 2654435761) >>> 0)).sort((a, b) => a - b);
    expect(Math.abs(draws[2000]! / 129 - 1)).toBeLessThan(0.08);
    expect(naturalLength(DEFAULT_LENGTH_DISTRIBUTION, 12345)).toBe(naturalLength(DEFAULT_LENGTH_DISTRIBUTION, 12345));
  });
});
