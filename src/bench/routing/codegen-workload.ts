/**
 * The code-generation workload of llm-d's token-aware routing experiment,
 * as its post describes it (a conversation replay from inference-perf's
 * workload catalog): each conversation has a system prompt of its own, then
 * turns; each turn sends the whole conversation so far (system prompt, every
 * earlier question and answer) with a new question, and waits for its answer
 * before the next. Nothing is shared between conversations, so cache hits
 * come only from a conversation's earlier turns.
 *
 * The post gives each length's range and mean; the spread is not published
 * (the workload files it links are not public). Each length is drawn from a
 * log-normal with the published mean and the coefficient of variation below,
 * redrawn until it falls in the published range (so the realised mean moves
 * a little; the report gives it).
 */
import { seededUnit } from "../../shared/seeded.ts";
import type { PromptSegment } from "../replay/prompt-text.ts";

interface LengthLaw {
  min: number;
  max: number;
  mean: number;
  /** Standard deviation over mean. */
  cv: number;
}

/** Published ranges and means; the spreads are this bench's choice, where the catalog's own code-generation entry gives one, its. */
const CODEGEN_LENGTHS = {
  /** Per-conversation system prompt: 3,000–100,000 tokens, mean ~55,000 (spread assumed). */
  system: { min: 3_000, max: 100_000, mean: 55_000, cv: 0.5 },
  /** Turns per conversation: 2–20, mean 6 (spread assumed). */
  turns: { min: 2, max: 20, mean: 6, cv: 0.5 },
  /** Question tokens per turn: 100–10,000, mean 1,500; the catalog's spread (1,200). */
  input: { min: 100, max: 10_000, mean: 1_500, cv: 0.8 },
  /** Answer tokens per turn: 50–4,000, mean 800; the catalog's spread relative to its mean (825 / 425). */
  output: { min: 50, max: 4_000, mean: 800, cv: 1.94 },
} as const satisfies Record<string, LengthLaw>;

interface Turn {
  inputTokens: number;
  outputTokens: number;
}

export interface Conversation {
  systemTokens: number;
  turns: Turn[];
}

/** `count` conversations from `seed`; each keeps to `maxModelLen` (turns that would not fit, prompt and answer, are left out, as inference-perf's max_model_len does). */
export function codegenConversations(count: number, seed: number, maxModelLen: number): Conversation[] {
  const unit = seededUnit(seed ^ 0xc0de);
  const draw = (law: LengthLaw) => truncatedLogNormal(law, unit);
  const out: Conversation[] = [];
  for (let c = 0; c < count; c++) {
    const systemTokens = draw(CODEGEN_LENGTHS.system);
    const n = draw(CODEGEN_LENGTHS.turns);
    const turns: Turn[] = [];
    let context = systemTokens;
    for (let t = 0; t < n; t++) {
      const turn = { inputTokens: draw(CODEGEN_LENGTHS.input), outputTokens: draw(CODEGEN_LENGTHS.output) };
      if (context + turn.inputTokens + turn.outputTokens > maxModelLen) break;
      turns.push(turn);
      context += turn.inputTokens + turn.outputTokens;
    }
    out.push({ systemTokens, turns });
  }
  return out;
}

/** Turn `t`'s prompt: the system prompt, every earlier question and answer, and its own question (each named for its conversation, so no two conversations share text). */
export function turnSegments(conversation: number, c: Conversation, t: number): PromptSegment[] {
  const segments: PromptSegment[] = [{ key: `codegen-${conversation}-system`, tokens: c.systemTokens }];
  for (let j = 0; j <= t; j++) {
    segments.push({ key: `codegen-${conversation}-question-${j}`, tokens: c.turns[j]!.inputTokens });
    if (j < t) segments.push({ key: `codegen-${conversation}-answer-${j}`, tokens: c.turns[j]!.outputTokens });
  }
  return segments;
}

/** A whole number from the law: log-normal with its mean and spread, redrawn until within [min, max]. */
function truncatedLogNormal(law: LengthLaw, unit: () => number): number {
  const sigma2 = Math.log(1 + law.cv * law.cv);
  const mu = Math.log(law.mean) - sigma2 / 2;
  const sigma = Math.sqrt(sigma2);
  for (let tries = 0; tries < 1000; tries++) {
    // Box–Muller; 1 − u keeps the logarithm finite.
    const z = Math.sqrt(-2 * Math.log(1 - unit())) * Math.cos(2 * Math.PI * unit());
    const v = Math.round(Math.exp(mu + sigma * z));
    if (v >= law.min && v <= law.max) return v;
  }
  return Math.round(Math.min(law.max, Math.max(law.min, law.mean)));
}
