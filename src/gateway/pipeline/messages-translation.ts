/**
 * A Messages API request served by an endpoint that does not serve the
 * Messages API (its config leaves the route out, or it answered the path
 * with a route-missing 404): the body asked of it instead (a chat completion,
 * or /tokenize for count_tokens) and its answer turned back into the Messages
 * API's (request/messages-to-chat.ts, proxy/chat-to-messages.ts). Only these
 * routes come here; chat's path never does.
 */
import { chatAnswerToMessage, chatToMessagesStream, tokenizeToCount } from "../proxy/chat-to-messages.ts";
import type { Exchange } from "../request/exchange.ts";
import { countTokensToTokenize, messagesToChat, type TRANSLATED_ROUTES } from "../request/messages-to-chat.ts";
import type { ParsedRequest } from "../request/parse.ts";

export type Translation = NonNullable<(typeof TRANSLATED_ROUTES)[keyof typeof TRANSLATED_ROUTES]>;

/** The body to send for `model` on the translated route. */
export function translatedBody(request: ParsedRequest, model: string, via: Translation): string {
  return via.route === "tokenize" ? countTokensToTokenize(request.body, model) : messagesToChat(request.body, model);
}

/** A whole answer of the translated route as the Messages API's; undefined when the engine's answer is not one. */
export function translatedAnswer(body: Uint8Array, via: Translation): Uint8Array | undefined {
  return via.route === "tokenize" ? tokenizeToCount(body) : chatAnswerToMessage(body);
}

/** The relayed chat stream as the Messages event stream (the usage the relay settles goes into message_delta). */
export function translatedStream(body: ReadableStream<Uint8Array>, x: Pick<Exchange, "usage">): ReadableStream<Uint8Array> {
  return body.pipeThrough(chatToMessagesStream(() => x.usage));
}

/** A committed (large) answer read whole, then translated: a translation needs the whole answer. */
export function translatedWhole(body: ReadableStream<Uint8Array>, via: Translation): ReadableStream<Uint8Array> {
  return new ReadableStream<Uint8Array>({
    async start(controller) {
      try {
        const out = translatedAnswer(await new Response(body).bytes(), via);
        if (out === undefined) controller.error(new Error("the engine's answer could not be translated"));
        else {
          controller.enqueue(out);
          controller.close();
        }
      } catch (err) {
        controller.error(err);
      }
    },
  });
}
