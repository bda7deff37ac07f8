/**
 * What a client reads from one streamed OpenAI answer, for checking that an
 * answer is whole (a recovered stream must read as one answer):
 * the joined text, the stream identities seen (id, created, model), role
 * deltas, finish reasons, usage chunks, error events and [DONE]s.
 */

export interface Transcript {
  text: string;
  /** `id|created|model` of every chunk: one entry for one seamless stream. */
  ids: Set<string>;
  roles: number;
  finishes: string[];
  usages: unknown[];
  /** Error events' codes (or messages). */
  errors: string[];
  done: number;
}

interface Chunk {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: { delta?: { role?: unknown; content?: unknown }; text?: unknown; finish_reason?: unknown }[];
  usage?: unknown;
  error?: { code?: unknown; message?: unknown };
}

/** The data payloads of an SSE body ("[DONE]" included), in order. */
export function ssePayloads(body: string): string[] {
  return body
    .split("\n\n")
    .map((e) => e.trim())
    .filter((e) => e.startsWith("data:"))
    .map((e) => e.slice(5).trim());
}

export function transcriptOf(payloads: readonly string[], route: "chat" | "completions"): Transcript {
  const t: Transcript = { text: "", ids: new Set(), roles: 0, finishes: [], usages: [], errors: [], done: 0 };
  for (const payload of payloads) {
    if (payload === "[DONE]") {
      t.done++;
      continue;
    }
    let c: Chunk;
    try {
      c = JSON.parse(payload) as Chunk;
    } catch {
      t.errors.push(`unparsable event: ${payload.slice(0, 100)}`);
      continue;
    }
    if (c.error) {
      t.errors.push(String(c.error.code ?? c.error.message));
      continue;
    }
    t.ids.add(`${String(c.id)}|${String(c.created)}|${String(c.model)}`);
    if (c.usage) t.usages.push(c.usage);
    const choice = c.choices?.[0];
    if (!choice) continue;
    if (typeof choice.delta?.role === "string") t.roles++;
    const piece = route === "chat" ? choice.delta?.content : choice.text;
    if (typeof piece === "string") t.text += piece;
    if (typeof choice.finish_reason === "string") t.finishes.push(choice.finish_reason);
  }
  return t;
}
