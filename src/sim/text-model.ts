/**
 * The sim-engine's "language model": each output token is a function of
 * everything before it — the seed, the prompt and the tokens generated so
 * far — the way greedy decoding is. So a request that carries P plus the
 * first k tokens of P's answer (a chat prefill with continue_final_message,
 * or a raw prompt + delivered text) continues with exactly the tokens the
 * uninterrupted answer has from position k on, byte for byte.
 *
 * The context is folded into a 32-bit FNV-1a state, one UTF-16 unit at a
 * time, so extending it by a token costs a few multiplies and the prompt is
 * hashed once. A token is picked from the state through murmur3's finaliser.
 */

/**
 * The output vocabulary: plain words with a leading space, JSON-safe as they
 * are, so a chunk can be assembled from pre-encoded bytes without escaping,
 * and a text made of them splits back into its tokens at the spaces.
 */
export const VOCAB: readonly string[] = (
  "the of and to in is was for on that with as by at from his her it an were are which this be or has had " +
  "not but one their also its they first new after who two been other when time there all into can more " +
  "only most over may some would such these city than made during she three between through under world year"
)
  .split(" ")
  .map((w) => ` ${w}`);

export const VOCAB_INDEX: ReadonlyMap<string, number> = new Map(VOCAB.map((w, i) => [w, i]));

const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** Fold text[from, to) into the state. */
export function extendState(state: number, text: string, from = 0, to = text.length): number {
  let h = state;
  for (let i = from; i < to; i++) h = Math.imul(h ^ text.charCodeAt(i), FNV_PRIME);
  return h >>> 0;
}

/** The state before any context: the request's `seed` (when given) changes every token after it. */
export function seedState(seed: number | undefined): number {
  return seed === undefined ? FNV_OFFSET : extendState(FNV_OFFSET, `\u0000seed:${seed}\u0000`);
}

/** murmur3's 32-bit finaliser: FNV's low bits alone repeat too regularly to pick words by. */
function fmix32(x: number): number {
  let h = x;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The vocabulary index of the token that follows a context in `state`. */
function nextToken(state: number): number {
  return fmix32(state) % VOCAB.length;
}

/** One answer's tokens, computed on demand from the state after its context; token i is the same whatever order it is asked in. */
export class SimOutput {
  private readonly ids: number[] = [];
  private state: number;

  constructor(contextState: number) {
    this.state = contextState;
  }

  /** Vocabulary index of output token `i` (0-based). */
  tokenIndex(i: number): number {
    const ids = this.ids;
    while (ids.length <= i) {
      const id = nextToken(this.state);
      ids.push(id);
      this.state = extendState(this.state, VOCAB[id]!);
    }
    return ids[i]!;
  }

  tokenText(i: number): string {
    return VOCAB[this.tokenIndex(i)]!;
  }

  /** The text of the first `n` tokens. */
  text(n: number): string {
    let s = "";
    for (let i = 0; i < n; i++) s += this.tokenText(i);
    return s;
  }
}

/** What the model makes of a text context. */
interface ContextState {
  /** The state after the whole context: the next token is nextToken(state). */
  state: number;
  /**
   * Tokens at the end of the context that are exactly what the model would
   * have generated there (its own answer being continued): a prefill of k
   * delivered tokens gives k. They count one token each, and toward the
   * natural end of the answer (--output-len).
   */
  continued: number;
  /** Where those tokens start in the text (text.length when there are none). */
  continuedFrom: number;
  /** The state before the continued tokens (= state when there are none): what the answer's natural length is drawn from. */
  baseState: number;
}

/**
 * Read a context: the state after it, and how many of its last words the
 * model itself would have produced. Splitting at spaces is exact for the
 * model's own output (every token is one space-led word); the run of
 * predicted words is found forward, because each prediction depends on
 * everything before it. A prompt of ordinary text ends in such a word only
 * by chance (about 1 in 89 when it ends in a vocabulary word); the rule is
 * the same for every request, so continuations stay exact even then.
 */
export function readContext(text: string, seed: number | undefined): ContextState {
  // Backward: the words at the end that are vocabulary words.
  const starts: number[] = [];
  let end = text.length;
  while (end > 0) {
    const space = text.lastIndexOf(" ", end - 1);
    if (space < 0 || !VOCAB_INDEX.has(text.slice(space, end))) break;
    starts.push(space);
    end = space;
  }
  // Forward: fold the text and count the trailing run of predicted words.
  let state = extendState(seedState(seed), text, 0, end);
  let continued = 0;
  let continuedFrom = text.length;
  let baseState = state;
  for (let w = starts.length - 1; w >= 0; w--) {
    const from = starts[w]!;
    const to = w > 0 ? starts[w - 1]! : text.length;
    if (nextToken(state) === VOCAB_INDEX.get(text.slice(from, to))) {
      if (continued === 0) {
        continuedFrom = from;
        baseState = state;
      }
      continued++;
    } else {
      continued = 0;
      continuedFrom = text.length;
    }
    state = extendState(state, text, from, to);
  }
  return { state, continued, continuedFrom, baseState: continued > 0 ? baseState : state };
}

/**
 * The longest run of whole space-led words at the start of text[from, to)
 * that are each what the model predicts there, starting from `state` (the
 * state after text[0, from)): their vocabulary indices and where the run
 * ends. An answer sent back whole is all of it; one cut short by a stop
 * string, or with text added, keeps the words it shares with what was
 * generated.
 */
export function ownWords(state: number, text: string, from: number, to: number): { words: number[]; end: number } {
  const words: number[] = [];
  let h = state;
  let at = from;
  while (at < to && text.charCodeAt(at) === 32) {
    let next = text.indexOf(" ", at + 1);
    if (next < 0 || next > to) next = to;
    const w = VOCAB_INDEX.get(text.slice(at, next));
    if (w === undefined || nextToken(h) !== w) break;
    words.push(w);
    h = extendState(h, text, at, next);
    at = next;
  }
  return { words, end: at };
}
