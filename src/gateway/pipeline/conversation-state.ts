/**
 * Conversation state for the Responses API, kept by the gateway so that any
 * replica can answer a follow-up (vLLM keeps it only in one process, and
 * only with VLLM_ENABLE_RESPONSES_API_STORE). Before admission: a
 * `previous_response_id` is looked up in the tenant's stored responses and
 * expanded into the input (the stored conversation, its output, the new
 * input), and removed — with `background` — from what the engine is sent;
 * one that is absent, another tenant's or expired is a 400
 * PREVIOUS_RESPONSE_NOT_FOUND, as OpenAI answers. A `background: true`
 * request is stored queued and answered at once (jobs/background-responses.ts
 * runs it). On the way out, when `store` is not false, the answer is watched
 * (its last event for a stream, the body otherwise) and the response stored
 * with its input and the conversation it answered.
 */

import type { Config } from "../../config/types.ts";
import {
  type BackgroundRequest,
  type ConversationLink,
  expandedInput,
  inputItems,
  listedItems,
  queuedResponse,
  RESPONSE_ID,
  RUNNING,
  type StoredResponse,
  statusOf,
} from "../../jobs/responses-objects.ts";
import type { GatewayResponses } from "../../jobs/responses-service.ts";
import { isStorageFull, storageFull } from "../../jobs/storage-errors.ts";
import type { NotStoredReason } from "../../metrics/names.ts";
import type { GatewayMetrics } from "../../metrics/registry.ts";
import { LlmgwError } from "../../shared/errors.ts";
import type { Logger } from "../../shared/logger.ts";
import { namedEventJson } from "../proxy/named-events.ts";
import { classifyResponsesEvent } from "../proxy/responses-events.ts";
import { SseScanner } from "../proxy/sse-scanner.ts";
import type { AnswerRecorders } from "../request/answer-recorders.ts";
import type { Exchange } from "../request/exchange.ts";
import { type InferenceBody, type ParsedRequest, parsedRequest } from "../request/parse.ts";

type Obj = Record<string, unknown>;

/** What the conversation step uses: the stored responses (store opened on first use), their limits, and what it reports. */
export interface ConversationDeps {
  readonly config: Pick<Config, "responses">;
  readonly responses: Pick<GatewayResponses, "opened" | "noteStorageFull" | "noteStored" | "purgeNowAndThen" | "storageFullForS">;
  readonly metrics: Pick<GatewayMetrics, "responsesNotStored">;
  readonly log: Pick<Logger, "warn" | "error">;
}

/** A background response being run: its answer is stored under `id`; `stored` settles once it is. */
export interface ConversationTarget {
  readonly id: string;
  stored?: Promise<void>;
}

const enc = new TextEncoder();
const decoder = new TextDecoder();

function notFound(id: string): LlmgwError {
  return new LlmgwError("PREVIOUS_RESPONSE_NOT_FOUND", `Previous response with id '${id}' not found.`, { param: "previous_response_id" });
}

/** The conversation of the stored response a follow-up continues (the tenant's, not expired, answered). */
async function previousConversation(ctx: ConversationDeps, x: Exchange, id: string): Promise<ConversationLink[]> {
  const { store } = await ctx.responses.opened();
  const prev = await store.conversation(x.tenant, id, Date.now());
  if (prev === undefined) throw notFound(id);
  if (RUNNING.includes(prev.status))
    throw new LlmgwError(
      "INVALID_REQUEST",
      `Previous response with id '${id}' is still ${prev.status === "queued" ? "queued" : "in progress"}; continue it once it has completed.`,
      { param: "previous_response_id" },
    );
  return prev.links;
}

/**
 * The conversation step of a Responses API request (after the body is read,
 * before the estimate and the gates): a Response when the request is
 * answered here (a background response accepted), otherwise the request to
 * go on with (a follow-up's expanded, without the fields only llmgw reads).
 */
export async function conversationStep(
  ctx: ConversationDeps,
  x: Exchange,
  request: ParsedRequest,
  answer: AnswerRecorders,
  target: ConversationTarget | undefined,
): Promise<Response | ParsedRequest> {
  const { body } = request;
  // vLLM answers under the request's request_id: one that no /v1/responses/{id} path can name would be stored unreachable.
  if ("request_id" in body && (typeof body.request_id !== "string" || !RESPONSE_ID.test(body.request_id))) {
    throw new LlmgwError(
      "INVALID_REQUEST",
      "'request_id' must be 1 to 200 characters of letters, digits, '_', '-', '.' or ':' (it becomes the response's id)",
      { param: "request_id" },
    );
  }
  const fullForS = body.store !== false && target === undefined ? ctx.responses.storageFullForS() : undefined;
  if (fullForS !== undefined) throw storeRefused(fullForS);
  if (body.background === true && target === undefined) return acceptBackground(ctx, x, body);
  const own = inputItems(body.input);
  let context = own;
  const previousId = typeof body.previous_response_id === "string" ? body.previous_response_id : undefined;
  if (previousId !== undefined) context = expandedInput(await previousConversation(ctx, x, previousId), own);
  let sent = request;
  if (previousId !== undefined || "background" in body || "previous_response_id" in body) {
    const out: InferenceBody = { ...body, input: previousId === undefined ? body.input : context };
    delete out.previous_response_id;
    delete out.background;
    sent = parsedRequest(out, enc.encode(JSON.stringify(out)), request.model, request.contentType);
  }
  if (body.store !== false) answer.add(conversationRecorder(ctx, x, { own, previousId, target }));
  return sent;
}

/** A request asking to be stored while the store has no room: refused before an engine runs. */
function storeRefused(retryAfterS: number): LlmgwError {
  return storageFull("the response cannot be stored", "send store: false to be answered without storing, or try again later", retryAfterS);
}

/** An answer relayed but not stored: a log line and the metric, so it is never silent. */
function notStored(ctx: ConversationDeps, x: Exchange, reason: NotStoredReason, fields: Record<string, unknown>): void {
  ctx.metrics.responsesNotStored.inc({ reason });
  ctx.log[reason === "too_large" ? "warn" : "error"]({ request_id: x.requestId, reason, ...fields }, "response answered but not stored");
}

/** `background: true`: stored queued (with what to run) and answered with the queued response at once. */
async function acceptBackground(ctx: ConversationDeps, x: Exchange, body: Readonly<InferenceBody>): Promise<Response> {
  if (body.store === false) throw new LlmgwError("INVALID_REQUEST", "background mode requires store to be true", { param: "background" });
  if (body.stream === true)
    throw new LlmgwError("INVALID_REQUEST", "a background response cannot stream through llmgw; create it without stream and poll GET /v1/responses/{id}", {
      param: "stream",
    });
  if (typeof body.previous_response_id === "string") await previousConversation(ctx, x, body.previous_response_id);
  const { store, background } = await ctx.responses.opened();
  const id = `resp_${crypto.randomUUID().replaceAll("-", "")}`;
  const now = Date.now();
  const run: Obj = { ...body, stream: false };
  delete run.background;
  const request: BackgroundRequest = { body: run, band: x.band, bandName: x.bandName, path: x.path };
  const placeholder = queuedResponse(id, Math.floor(now / 1000), body);
  const record: StoredResponse = {
    id,
    tenant: x.tenant,
    createdMs: now,
    expiresMs: now + ctx.config.responses.storeTtlMs,
    status: "queued",
    response: JSON.stringify(placeholder),
    input: JSON.stringify(listedItems(inputItems(body.input))),
    context: "[]",
    request: JSON.stringify(request),
  };
  try {
    await store.put(record, ctx.config.responses.maxStoredBytesPerTenant);
  } catch (err) {
    if (!isStorageFull(err)) throw err;
    ctx.responses.noteStorageFull();
    throw storeRefused(ctx.responses.storageFullForS() ?? 30);
  }
  ctx.responses.noteStored();
  background.wake();
  x.finish("ok", 200);
  return Response.json(placeholder, { headers: x.headers() });
}

interface Conversation {
  /** The request's own input items (what its record stores of the conversation). */
  own: unknown[];
  previousId: string | undefined;
  target: ConversationTarget | undefined;
}

/** Reads the answer's response object as its bytes pass: the last event of a stream, the whole body otherwise (bounded). */
class AnswerCapture {
  private readonly scanner: SseScanner | undefined;
  private final: Uint8Array | undefined;
  private chunks: Uint8Array[] = [];
  private size = 0;
  private overflow = false;

  constructor(
    stream: boolean,
    private readonly max: number,
  ) {
    if (stream) this.scanner = new SseScanner(classifyResponsesEvent);
  }

  push(chunk: Uint8Array): void {
    if (this.scanner) {
      this.scanner.scan(chunk, (kind, buf, start, end) => {
        if (kind === "final") this.final = buf.slice(start, end);
      });
      return;
    }
    if (this.overflow) return;
    this.size += chunk.byteLength;
    if (this.size > this.max) {
      this.overflow = true;
      this.chunks = [];
    } else this.chunks.push(chunk);
  }

  /** The response object, or undefined when the answer holds none (a broken stream, an oversized body). */
  response(): Obj | undefined {
    if (this.scanner) {
      const r = this.final === undefined ? undefined : namedEventJson(this.final)?.response;
      return typeof r === "object" && r !== null ? (r as Obj) : undefined;
    }
    if (this.overflow) return undefined;
    try {
      const v: unknown = JSON.parse(decoder.decode(Buffer.concat(this.chunks, this.size)));
      return typeof v === "object" && v !== null && (v as Obj).object === "response" ? (v as Obj) : undefined;
    } catch {
      return undefined;
    }
  }
}

/** Store the answered response (for a background run, in place of its placeholder). */
async function store(ctx: ConversationDeps, x: Exchange, c: Conversation, response: Obj): Promise<void> {
  const { store: responses } = await ctx.responses.opened();
  const id = c.target?.id ?? (typeof response.id === "string" ? response.id : undefined);
  if (id === undefined) return;
  if (!RESPONSE_ID.test(id)) {
    notStored(ctx, x, "unreachable_id", { response_id: id.slice(0, 200) });
    return;
  }
  const stored: Obj = { ...response, id };
  // The engine was sent the whole conversation, not the id: the stored object says what the client asked.
  if (c.previousId !== undefined) stored.previous_response_id = c.previousId;
  if (c.target !== undefined) stored.background = true;
  stored.store = true;
  const now = Date.now();
  const record: StoredResponse = {
    id,
    tenant: x.tenant,
    createdMs: now,
    expiresMs: now + ctx.config.responses.storeTtlMs,
    status: statusOf(stored),
    response: JSON.stringify(stored),
    input: JSON.stringify(listedItems(c.own)),
    // Each turn once: a follow-up names the response it continues, whose record holds what came before.
    context: JSON.stringify(c.own),
  };
  if (c.previousId !== undefined) record.previousId = c.previousId;
  const bytes = record.response.length + record.input.length + record.context.length;
  if (bytes > ctx.config.responses.maxRecordBytes) {
    notStored(ctx, x, "too_large", { response_id: id, bytes, max_record_bytes: ctx.config.responses.maxRecordBytes });
    return;
  }
  if (c.target !== undefined) {
    await responses.update(x.tenant, id, ["in_progress"], {
      status: record.status,
      response: record.response,
      input: record.input,
      context: record.context,
      ...(c.previousId === undefined ? {} : { previousId: c.previousId }),
      request: null,
      owner: null,
      leaseUntilMs: null,
    });
  } else {
    await responses.put(record, ctx.config.responses.maxStoredBytesPerTenant);
    ctx.responses.purgeNowAndThen(responses);
  }
  ctx.responses.noteStored();
}

/** The answer as the client gets it, watched on its way: the same bytes, pull-based (a client that leaves cancels upstream at once). */
function conversationRecorder(ctx: ConversationDeps, x: Exchange, c: Conversation): (res: Response) => Response {
  return function recordConversation(res: Response): Response {
    if (res.status !== 200 || res.body === null) return res;
    const capture = new AnswerCapture(res.headers.get("content-type")?.includes("text/event-stream") === true, ctx.config.responses.maxRecordBytes);
    const reader = res.body.getReader();
    let resolveStored: () => void = () => {};
    if (c.target !== undefined) c.target.stored = new Promise<void>((r) => (resolveStored = r));
    let settled = false;
    const settle = async (complete: boolean): Promise<void> => {
      if (settled) return;
      settled = true;
      const response = complete ? capture.response() : undefined;
      try {
        if (response !== undefined) await store(ctx, x, c, response);
      } catch (err) {
        // The answer is on its way to the client already (status and headers sent): it cannot say so any more.
        const full = isStorageFull(err);
        if (full) ctx.responses.noteStorageFull();
        notStored(ctx, x, full ? "storage_full" : "store_error", { err: err instanceof Error ? err.message : String(err) });
      } finally {
        resolveStored();
      }
    };
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        let step: Awaited<ReturnType<typeof reader.read>>;
        try {
          step = await reader.read();
        } catch (err) {
          void settle(false);
          controller.error(err);
          return;
        }
        if (step.done) {
          // Stored before the client sees the answer end: a follow-up sent the moment it has the
          // response (to this gateway or another) finds it.
          await settle(true);
          controller.close();
          return;
        }
        capture.push(step.value);
        controller.enqueue(step.value);
      },
      cancel(reason) {
        void settle(false);
        return reader.cancel(reason);
      },
    });
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}
