/**
 * The body sent to the engine: the client's own bytes whenever nothing must
 * change, otherwise the smallest change — one member spliced in after the
 * opening brace — rather than re-serialising a (possibly long) prompt.
 */
import type { Exchange } from "../request/exchange.ts";
import type { InferenceBody, ParsedRequest } from "../request/parse.ts";

const USAGE_MEMBER = new TextEncoder().encode('"stream_options":{"include_usage":true},');

/** What to send for `model` (the request's own, or a fallback's). */
export function upstreamBody(x: Exchange, request: ParsedRequest, model: string): Uint8Array | string {
  const { body } = request;
  const renamed = model !== body.model;
  // Ask the engine for usage on every chat or completions stream: token
  // accounting needs it; the relay drops the usage chunk again if the client
  // did not ask for it. (A Responses stream reports usage in its last event;
  // a transcription's form is forwarded as it is.)
  const addUsage = request.stream && !request.includeUsage && (x.route === "chat" || x.route === "completions");
  if (!renamed && !addUsage) return request.rawBody;
  if (!renamed && body.stream_options === undefined) {
    // The body parsed as a JSON object, so its first non-blank byte is '{';
    // "{}" cannot happen (model is required), so a member follows the comma.
    const raw = request.rawBody;
    const at = raw.indexOf(123 /* { */) + 1;
    const out = new Uint8Array(raw.length + USAGE_MEMBER.length);
    out.set(raw.subarray(0, at), 0);
    out.set(USAGE_MEMBER, at);
    out.set(raw.subarray(at), at + USAGE_MEMBER.length);
    return out;
  }
  const out: InferenceBody = { ...body, model };
  if (addUsage) out.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
  return JSON.stringify(out);
}
