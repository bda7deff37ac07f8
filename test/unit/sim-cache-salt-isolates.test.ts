/** cache_salt keys a request's first block (vLLM's extra keys), so requests under another salt, or none, never share its blocks. */
import { describe, expect, test } from "bun:test";
import { parseGenerationRequest, type RequestLimits } from "../../src/sim/openai-request.ts";
import { parseResponsesRequest } from "../../src/sim/routes/responses-request.ts";
import { SimHttpError } from "../../src/sim/vllm-errors.ts";
import { runOne, simCore, simRequest } from "../helpers/sim-core.ts";

const LIMITS: RequestLimits = { models: ["m"], maxModelLen: 4096, blockSize: 16, outputLen: 2, hashRoot: 7n };
const SYSTEM = "You are a careful assistant who answers in full sentences. ".repeat(8);

function chat(salt?: unknown, question = "What is a KV block?") {
  const body = {
    model: "m",
    messages: [
      { role: "system", content: SYSTEM },
      { role: "user", content: question },
    ],
    ...(salt === undefined ? {} : { cache_salt: salt }),
  };
  return parseGenerationRequest("chat", JSON.stringify(body), LIMITS).prompt;
}

function refusal(f: () => unknown): SimHttpError {
  try {
    f();
  } catch (err) {
    if (err instanceof SimHttpError) return err;
    throw err;
  }
  throw new Error("not refused");
}

describe("cache_salt", () => {
  test("the same ids, other block hashes: every block differs, the salt keying the first and the chain the rest", () => {
    const plain = chat();
    const a = chat("a");
    const b = chat("b");
    expect(Array.from(a.ids)).toEqual(Array.from(plain.ids));
    expect(plain.blockHashes.length).toBeGreaterThan(4);
    for (let j = 0; j < plain.blockHashes.length; j++) {
      expect(a.blockHashes[j]).not.toBe(plain.blockHashes[j]);
      expect(b.blockHashes[j]).not.toBe(a.blockHashes[j]);
    }
    expect(chat("a").blockHashes).toEqual(a.blockHashes);
    const completion = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: SYSTEM, cache_salt: "a" }), LIMITS).prompt;
    const unsalted = parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: SYSTEM }), LIMITS).prompt;
    expect(completion.blockHashes[0]).not.toBe(unsalted.blockHashes[0]);
  });

  test("in the engine: salted 'b' and unsalted requests miss what 'a' cached; 'a' hits it", () => {
    const core = simCore({ numGpuBlocks: 256 });
    expect(runOne(core, simRequest(chat("a"), 2)).cachedTokens).toBe(0);
    expect(runOne(core, simRequest(chat("b", "Another question?"), 2)).cachedTokens).toBe(0);
    expect(runOne(core, simRequest(chat(undefined, "A third question?"), 2)).cachedTokens).toBe(0);
    const again = chat("a", "A fourth question?");
    expect(runOne(core, simRequest(again, 2)).cachedTokens).toBeGreaterThanOrEqual(Math.floor(SYSTEM.length / 4 / 16) * 16);
  });

  test("vLLM's refusal for a salt that is not a non-empty string, on chat, completions and responses", () => {
    for (const salt of ["", 7, true, ["a"]]) {
      const err = refusal(() => chat(salt));
      expect(err.status).toBe(400);
      expect(err.message).toBe("Value error, Parameter 'cache_salt' must be a non-empty string if provided.");
      expect(err.param).toBe("cache_salt");
    }
    expect(refusal(() => parseGenerationRequest("completion", JSON.stringify({ model: "m", prompt: "x", cache_salt: "" }), LIMITS)).status).toBe(400);
    expect(refusal(() => parseResponsesRequest(JSON.stringify({ model: "m", input: "x", cache_salt: 1 }), LIMITS)).status).toBe(400);
    // null is "not given".
    expect(chat(null).blockHashes).toEqual(chat().blockHashes);
  });
});
