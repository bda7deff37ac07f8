/**
 * The Responses API's stored state as OpenAI documents it (API reference:
 * "Responses", "Conversation state"), pure: what a stored response keeps
 * (the response object, the request's own input items with their ids, and
 * the conversation the engine was sent), how a follow-up naming it with
 * `previous_response_id` expands into the input an engine can answer alone
 * (the earlier conversation, then the earlier output, then the new input;
 * the earlier `instructions` are not carried over, as OpenAI documents), the
 * input-items list, the deleted object, and a background response's
 * placeholder object.
 */

type Obj = Record<string, unknown>;

const RESPONSE_STATUSES = ["queued", "in_progress", "completed", "incomplete", "failed", "cancelled"] as const;
export type ResponseStatus = (typeof RESPONSE_STATUSES)[number];

/** The ids a stored response can have: what a path segment of /v1/responses/{id} reaches unescaped. */
export const RESPONSE_ID = /^[A-Za-z0-9_.:-]{1,200}$/;

/** Statuses of a response still to be answered (a background response). */
export const RUNNING: readonly ResponseStatus[] = ["queued", "in_progress"];

export interface StoredResponse {
  id: string;
  tenant: string;
  createdMs: number;
  /** After this the response is gone: GET is a 404, a follow-up naming it a 400. */
  expiresMs: number;
  status: ResponseStatus;
  /** The response object as GET answers it (JSON). */
  response: string;
  /** The request's own input items, ids given (JSON array): GET …/input_items. */
  input: string;
  /**
   * The conversation the engine was sent after `previousId`'s (JSON array of
   * input items): with a previous response, only this turn's own input —
   * that response's conversation and output come before it, read from its
   * record, so a chat stores each turn once; without one, the whole
   * conversation.
   */
  context: string;
  /** The response this one follows (`previous_response_id`), whose conversation and output precede `context`. */
  previousId?: string;
  /** A background response not yet run: what to run (JSON, a BackgroundRequest). */
  request?: string;
  /** A background response being run: the runner holding it, and until when. */
  owner?: string;
  leaseUntilMs?: number;
}

/** A record as reads answer it: its input items and conversation are read on their own (inputItems, conversation). */
export type ResponseRecord = Omit<StoredResponse, "input" | "context">;

/** One response of a conversation, as a follow-up's expansion reads it. */
export interface ConversationLink {
  /** The items the engine was sent after the previous link's output (JSON array). */
  context: string;
  /** The response object (JSON): its output follows `context`. */
  response: string;
}

/** One page of GET …/input_items, or what is missing: the response, or the item named by `after`. */
export type InputItemsPage = { page: Obj } | { missing: "response" | "after" };

/** The query of GET …/input_items. */
export interface InputItemsQuery {
  after?: string;
  limit: number;
  order: "asc" | "desc";
}

/** What a background response runs: the body (background and stream off) as the tenant, in its band. */
export interface BackgroundRequest {
  body: Obj;
  band: number;
  bandName: string;
  /** Where it was created (the audit line's route). */
  path: string;
}

/** A record's size for the tenant's budget. */
export function recordBytes(r: StoredResponse): number {
  return r.response.length + r.input.length + r.context.length + (r.request?.length ?? 0) + r.id.length;
}

function isObj(v: unknown): v is Obj {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A request's input as items: a string is one user message (EasyInputMessage, as OpenAI expands it). */
export function inputItems(input: unknown): unknown[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  return Array.isArray(input) ? input : [];
}

const ID_PREFIX: Readonly<Record<string, string>> = { message: "msg", function_call: "fc", function_call_output: "fco", reasoning: "rs" };

function hex(): string {
  return crypto.randomUUID().replaceAll("-", "");
}

/**
 * The input items as GET …/input_items lists them: each with an id (kept
 * when the client gave one), a message's type stated and its string
 * content as an input_text part (OpenAI lists them so).
 */
export function listedItems(items: readonly unknown[]): Obj[] {
  return items.map((item) => {
    if (!isObj(item)) return { id: `item_${hex()}`, type: "message", role: "user", content: [{ type: "input_text", text: String(item) }] };
    const type = typeof item.type === "string" ? item.type : "message";
    const out: Obj = { id: typeof item.id === "string" ? item.id : `${ID_PREFIX[type] ?? "item"}_${hex()}`, ...item, type };
    if (type === "message" && typeof item.content === "string") {
      out.content = [{ type: item.role === "assistant" ? "output_text" : "input_text", text: item.content }];
    }
    return out;
  });
}

/** The conversation a follow-up is sent: each stored link's items and its answer's output, oldest first, then the new input. */
export function expandedInput(links: readonly ConversationLink[], input: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (const link of links) {
    for (const item of JSON.parse(link.context) as unknown[]) out.push(item);
    const response = JSON.parse(link.response) as Obj;
    if (Array.isArray(response.output)) for (const item of response.output as unknown[]) out.push(item);
  }
  for (const item of input) out.push(item);
  return out;
}

/** The status a response object states ("completed" when it states none). */
export function statusOf(response: Obj): ResponseStatus {
  const s = response.status;
  return typeof s === "string" && (RESPONSE_STATUSES as readonly string[]).includes(s) ? (s as ResponseStatus) : "completed";
}

/** The object a DELETE answers with. */
export function deletedObject(id: string): Obj {
  return { id, object: "response", deleted: true };
}

/** A background response before it has run (status queued): the fields OpenAI's response object has, from the request. */
export function queuedResponse(id: string, createdS: number, body: Obj): Obj {
  return {
    id,
    object: "response",
    created_at: createdS,
    status: "queued",
    background: true,
    error: null,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    metadata: body.metadata ?? {},
    model: body.model,
    output: [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    store: true,
    temperature: body.temperature ?? null,
    text: body.text ?? null,
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_p: body.top_p ?? null,
    truncation: body.truncation ?? "disabled",
    usage: null,
    user: body.user ?? null,
  };
}

/** One page of GET …/input_items: `order` desc (OpenAI's default) lists the newest first; `after` is an item id. */
export function inputItemsPage(items: readonly Obj[], query: InputItemsQuery): Obj | undefined {
  const ordered = query.order === "asc" ? items : [...items].reverse();
  let from = 0;
  if (query.after !== undefined) {
    const at = ordered.findIndex((i) => i.id === query.after);
    if (at < 0) return undefined;
    from = at + 1;
  }
  const data = ordered.slice(from, from + query.limit);
  return {
    object: "list",
    data,
    first_id: data[0]?.id ?? null,
    last_id: data[data.length - 1]?.id ?? null,
    has_more: from + query.limit < ordered.length,
  };
}
