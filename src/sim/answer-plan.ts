/**
 * What each choice of a request will answer (pure): how many tokens, why
 * it ends, and — with stop strings — the text each token adds to what the
 * client sees. Follows vLLM's sampling parameters:
 * max_tokens / max_completion_tokens cap the answer (default: the context
 * left, vllm/entrypoints/openai/protocol.py); the model's own end (EOS) comes
 * at the prompt's natural length unless `ignore_eos`; `min_tokens` holds off
 * EOS and stop strings until that many tokens exist; a `stop` string ends
 * the answer with finish_reason "stop" and stop_reason the string, the
 * string itself left out unless `include_stop_str_in_output`, and while
 * streaming the detokenizer holds back the last (longest stop − 1)
 * characters so no part of a stop string is ever sent
 * (vllm/v1/engine/detokenizer.py). `n` choices per prompt each follow their
 * own sample; choice 0 is the answer n = 1 would give.
 */
import { type LengthDistribution, naturalLength } from "./output-length.ts";
import type { ToolCallPlan } from "./routes/tool-call-plan.ts";
import { extendState, SimOutput } from "./text-model.ts";
import type { PromptTokens } from "./tokens.ts";

interface AnswerAsk {
  maxTokens: number | undefined;
  ignoreEos: boolean;
  minTokens: number;
  stop: readonly string[];
  includeStopStr: boolean;
  n: number;
}

interface AnswerLimits {
  maxModelLen: number;
  outputLen: number;
  outputLenDist?: LengthDistribution;
}

export interface ChoicePlan {
  /** The choice's `index` in the response (prompt × n + sample). */
  index: number;
  prompt: PromptTokens;
  /** Model state the choice's tokens follow from (SimOutput). */
  state: number;
  outputTokens: number;
  finishReason: "stop" | "length";
  /** The stop string that ended it (vLLM's stop_reason); null otherwise. */
  stopReason: string | null;
  /** With stop strings: the text each token adds to the visible answer; absent: each token's own word. */
  texts?: string[];
  /** A forced tool call (routes/tool-calls.ts): the tokens are its arguments' pieces. */
  tool?: ToolCallPlan;
}

/** Choice i > 0 samples differently: its state and its length seed are salted with the index. */
function salted(state: number, i: number): number {
  return i === 0 ? state : extendState(state, `\u0000choice:${i}\u0000`);
}

function visibleTexts(
  out: SimOutput,
  tokens: number,
  stop: readonly string[],
  includeStop: boolean,
  minTokens: number,
): { tokens: number; stopReason: string | null; texts: string[] } {
  const longest = Math.max(...stop.map((s) => s.length));
  const holdback = includeStop ? 0 : longest - 1;
  let text = "";
  const ends: number[] = [];
  let stopAt = -1;
  let stopReason: string | null = null;
  for (let j = 0; j < tokens; j++) {
    const from = Math.max(0, text.length - longest + 1);
    text += out.tokenText(j);
    ends.push(text.length);
    if (j + 1 < Math.max(1, minTokens)) continue;
    let best = -1;
    for (const s of stop) {
      if (s.length === 0) continue;
      const q = text.indexOf(s, from);
      if (q >= 0 && (best < 0 || q < best)) {
        best = q;
        stopReason = s;
      }
    }
    if (best >= 0) {
      stopAt = includeStop ? best + stopReason!.length : best;
      tokens = j + 1;
      break;
    }
  }
  const finalLen = stopAt >= 0 ? stopAt : text.length;
  const texts: string[] = [];
  let shown = 0;
  for (let j = 0; j < tokens; j++) {
    const visible = j === tokens - 1 ? finalLen : Math.min(finalLen, Math.max(shown, ends[j]! - holdback));
    texts.push(text.slice(shown, visible));
    shown = visible;
  }
  return { tokens, stopReason: stopAt >= 0 ? stopReason : null, texts };
}

export function planChoices(prompts: readonly PromptTokens[], ask: AnswerAsk, limits: AnswerLimits): ChoicePlan[] {
  const plans: ChoicePlan[] = [];
  prompts.forEach((prompt, pi) => {
    for (let i = 0; i < ask.n; i++) {
      const state = salted(prompt.state, i);
      const seed = salted(prompt.baseState ?? prompt.state, i);
      const drawn = limits.outputLenDist ? naturalLength(limits.outputLenDist, seed) : limits.outputLen;
      // The answer's natural end counts the tokens of its own it continues, so a continuation ends where the original would.
      const natural = Math.max(1, Math.max(drawn, ask.minTokens + prompt.continued) - prompt.continued);
      const room = Math.max(1, limits.maxModelLen - prompt.count);
      let outputTokens: number;
      let finishReason: "stop" | "length";
      if (ask.maxTokens === undefined) {
        outputTokens = ask.ignoreEos ? room : Math.min(natural, room);
        finishReason = ask.ignoreEos || outputTokens < natural ? "length" : "stop";
      } else if (ask.ignoreEos || ask.maxTokens <= natural) {
        outputTokens = ask.maxTokens;
        finishReason = "length";
      } else {
        outputTokens = natural;
        finishReason = "stop";
      }
      const plan: ChoicePlan = { index: pi * ask.n + i, prompt, state, outputTokens: Math.max(1, outputTokens), finishReason, stopReason: null };
      if (ask.stop.length > 0) {
        const v = visibleTexts(new SimOutput(state), plan.outputTokens, ask.stop, ask.includeStopStr, ask.minTokens);
        if (v.stopReason !== null) {
          plan.outputTokens = v.tokens;
          plan.finishReason = "stop";
          plan.stopReason = v.stopReason;
        }
        plan.texts = v.texts;
      }
      plans.push(plan);
    }
  });
  return plans;
}
