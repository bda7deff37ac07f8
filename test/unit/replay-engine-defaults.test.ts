import { expect, test } from "bun:test";
import type { WindowRequest } from "../../src/bench/replay/trace.ts";
import { DEFAULT_REPLAY_PROFILE, replayEngineDefaults } from "../../src/bench/replay-scenario.ts";

const req = (inputTokens: number, outputTokens: number): WindowRequest => ({ atMs: 0, inputTokens, outputTokens, index: 0 });

test("the replay's engines get a profile, whose KV cache and context are derived, not a block count", () => {
  expect(DEFAULT_REPLAY_PROFILE).toBe("h100-llama-3.1-8b");
  expect(replayEngineDefaults([req(1_000, 200), req(12_000, 300)])).toEqual(["--profile", "h100-llama-3.1-8b"]);
});

test("a window with a request past the model's context raises only the context, to whole blocks", () => {
  // Llama-3.1's context is 131,072; a 135,155-token request (one of mooncake-synthetic's first 300 s) needs more.
  expect(replayEngineDefaults([req(134_000, 1_155)])).toEqual(["--profile", "h100-llama-3.1-8b", "--max-model-len", "135168"]);
  expect(replayEngineDefaults([req(131_000, 72)])).toEqual(["--profile", "h100-llama-3.1-8b"]); // exactly the context: served
  expect(replayEngineDefaults([req(131_000, 100)])).toEqual(["--profile", "h100-llama-3.1-8b", "--max-model-len", "131104"]);
  expect(replayEngineDefaults([req(1_000, 100)], "h200-llama-3.1-8b")).toEqual(["--profile", "h200-llama-3.1-8b"]);
});
