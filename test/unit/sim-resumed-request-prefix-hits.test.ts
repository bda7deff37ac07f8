/** A request resumed after a preemption looks up the prefix cache again; its lookup is counted apart, as vLLM's PrefixCacheStats keeps preempted requests. */
import { describe, expect, test } from "bun:test";
import { textPrompt } from "../../src/sim/tokens.ts";
import { runUntilDone, simCore, simRequest } from "../helpers/sim-core.ts";

describe("prefix hits of resumed requests", () => {
  test("a preempted request hits its own cached blocks when it comes back, counted apart from first admissions", () => {
    // 14 blocks of 16 tokens; two requests of 64 + 80 tokens need 9 each: the newer one is preempted.
    const core = simCore({ numGpuBlocks: 14, blockSize: 16 });
    const older = simRequest(textPrompt("a".repeat(4 * 64), 16, undefined, 7n), 80);
    const newer = simRequest(textPrompt("b".repeat(4 * 64), 16, undefined, 7n), 80);
    const s1 = core.submit(older, 0);
    const s2 = core.submit(newer, 0);
    runUntilDone(core, [older, newer]);
    const st = core.stats;
    expect(st.preemptions).toBeGreaterThan(0);
    // First admissions: their prompts, nothing cached.
    expect(st.prefixQueries).toBe(128);
    expect(st.prefixHits).toBe(0);
    // The comeback: its prompt and what it had generated, part of it still cached.
    expect(st.preemptedPrefix.requests).toBe(st.preemptions);
    expect(st.preemptedPrefix.queries).toBeGreaterThan(64);
    // More than its prompt: the blocks its own answer had filled are hit too.
    expect(st.preemptedPrefix.hits).toBeGreaterThan(64);
    expect(st.preemptedPrefix.hits % 16).toBe(0);
    // num_cached_tokens is what the first scheduling found: a resumption does not change it.
    expect(s1.cachedTokens).toBe(0);
    expect(s2.cachedTokens).toBe(0);
  });
});
