/** Blocks filled by generated tokens are cached and announced, so a chat's next turn (prompt + answer + a new message) hits the first answer's blocks. */
import { describe, expect, test } from "bun:test";
import type { BlockStored } from "../../src/engines/kv-events/model.ts";
import { SimOutput } from "../../src/sim/text-model.ts";
import { chatPrompt, countTextTokens, renderChat, textPrompt, WORD_BASE } from "../../src/sim/tokens.ts";
import { runOne, simCore, simRequest } from "../helpers/sim-core.ts";

const BS = 16;
const ROOT = 7n;
const QUESTION = "Tell me, in a few sentences, what a prefix cache does for a chat that goes on for several turns.";
const ANSWER_TOKENS = 40;

function firstTurn() {
  const messages = [{ role: "user", content: QUESTION }];
  const prompt = chatPrompt(messages, "generation-prompt", BS, undefined, ROOT);
  const answer = new SimOutput(prompt.state).text(ANSWER_TOKENS);
  const next = [...messages, { role: "assistant", content: answer }, { role: "user", content: "And what evicts it?" }];
  return { prompt, answer, next };
}

describe("a chat's second turn and the first answer's blocks", () => {
  test("the second turn's ids are the first turn's prompt ids, then the answer's generated ids", () => {
    const { prompt, next } = firstTurn();
    const second = chatPrompt(next, "generation-prompt", BS, undefined, ROOT);
    const answerIds = Array.from({ length: ANSWER_TOKENS }, (_, i) => WORD_BASE + new SimOutput(prompt.state).tokenIndex(i));
    expect(Array.from(second.ids.subarray(0, prompt.count))).toEqual(Array.from(prompt.ids));
    expect(Array.from(second.ids.subarray(prompt.count, prompt.count + ANSWER_TOKENS))).toEqual(answerIds);
    // The model state after the text is the text's, however it is cut into tokens.
    expect(second.state).toBe(textPrompt(renderChat(next), BS, undefined, ROOT).state);
  });

  test("an answer sent back cut short, with text of the client's after it, keeps the generated ids of its whole words", () => {
    const { prompt, answer } = firstTurn();
    const words = answer.split(" ").slice(0, 31).join(" "); // "", then 30 words
    const edited = [
      { role: "user", content: QUESTION },
      { role: "assistant", content: `${words} — edited by the client` },
      { role: "user", content: "ok" },
    ];
    const second = chatPrompt(edited, "generation-prompt", BS, undefined, ROOT);
    const generated = Array.from({ length: 30 }, (_, i) => WORD_BASE + new SimOutput(prompt.state).tokenIndex(i));
    expect(Array.from(second.ids.subarray(0, prompt.count + 30))).toEqual([...Array.from(prompt.ids), ...generated]);
    expect(second.ids[prompt.count + 30]! < WORD_BASE).toBe(true);
  });

  test("an assistant message that is not the model's own answer is plain text", () => {
    const messages = [
      { role: "user", content: QUESTION },
      { role: "assistant", content: " the of and to in is" },
      { role: "user", content: "ok" },
    ];
    expect(chatPrompt(messages, "generation-prompt", BS).count).toBe(countTextTokens(renderChat(messages)));
  });

  test("the engine core caches and announces the answer's full blocks, and the next turn hits them", () => {
    const core = simCore({ numGpuBlocks: 64, blockSize: BS, kvEvents: true });
    const { prompt, next } = firstTurn();
    const one = runOne(core, simRequest(prompt, ANSWER_TOKENS, { outputState: prompt.state }));
    expect(one.cachedTokens).toBe(0);
    const stored = core.kv.takeEvents().filter((e): e is BlockStored => e.type === "BlockStored");
    // The last sampled token is never computed: the blocks of the first count + 39 tokens are full and computed.
    const fullBlocks = Math.floor((prompt.count + ANSWER_TOKENS - 1) / BS);
    expect(fullBlocks).toBeGreaterThan(Math.floor(prompt.count / BS) + 1);
    expect(stored.flatMap((e) => e.blockHashes)).toEqual(one.blockHashes.slice(0, fullBlocks));
    const announced = stored.flatMap((e) => e.tokenIds);
    expect(announced.length).toBe(fullBlocks * BS);
    expect(announced.slice(prompt.count)).toEqual(Array.from(one.tokenIds(fullBlocks * BS).subarray(prompt.count)));
    expect(announced.slice(prompt.count).every((id) => id >= WORD_BASE)).toBe(true);

    const second = chatPrompt(next, "generation-prompt", BS, undefined, ROOT);
    const two = runOne(core, simRequest(second, 4, { outputState: second.state }));
    expect(two.cachedTokens).toBe(fullBlocks * BS);
  });
});
