/**
 * How the JSON management APIs (the fleet API, the keys API) answer what
 * goes wrong, in OpenAI's error shape: a malformed change is a 422
 * VALIDATION_FAILED naming the first bad field, a body that is not JSON a
 * 400, an answer that fails its own documented schema a 500 (our bug), and
 * anything unexpected is logged and answered as an internal error.
 */
import { asLlmgwError, errorResponse, LlmgwError } from "./errors.ts";
import { logger } from "./logger.ts";

interface ManagementApiErrors {
  /** Names the API in the log lines ("keys API"). */
  api: string;
  /** The message for a field the strict schema does not know; absent: zod's own. */
  unknownField?: (field: string) => string;
}

/** A malformed change: 422 in OpenAI's shape, naming the field. */
function unprocessable(err: LlmgwError): Response {
  return new Response(JSON.stringify(err.toBody()), { status: 422, headers: { "content-type": "application/json" } });
}

/** Elysia's validation error (zod issues through Standard Schema) as a VALIDATION_FAILED naming the first bad field. */
function validationError(error: unknown, unknownField: ManagementApiErrors["unknownField"]): LlmgwError {
  const all = (error as { all?: unknown }).all;
  const first = Array.isArray(all) ? (all[0] as { path?: unknown; message?: unknown } | undefined) : undefined;
  const rawPath = typeof first?.path === "string" ? first.path.replace(/^\//, "").replaceAll("/", ".") : "";
  const path = rawPath === "" || rawPath === "root" ? null : rawPath;
  const message = typeof first?.message === "string" ? first.message : "invalid request body";
  // zod's strict objects say "Unrecognized key: \"x\"".
  const unknown = unknownField && /^Unrecognized keys?: "([^"]*)"/.exec(message)?.[1];
  if (unknown !== undefined && unknownField) {
    const field = unknown.slice(0, 100);
    return new LlmgwError("VALIDATION_FAILED", unknownField(field), { param: field });
  }
  return new LlmgwError("VALIDATION_FAILED", path ? `${path}: ${message}` : message, { param: path });
}

/** The onError handler of an Elysia app serving a management API. */
export function managementApiErrors(o: ManagementApiErrors): (ctx: { code: unknown; error: unknown }) => Response | undefined {
  return ({ code, error }) => {
    // A refusal from a custom body reader (too large, not JSON) reaches here inside Elysia's ParseError.
    const cause = code === "PARSE" ? (error as { cause?: unknown }).cause : undefined;
    if (cause instanceof LlmgwError) return errorResponse(cause);
    // Before the lifecycle codes: Elysia takes an error's own `code` property (ours has NOT_FOUND too) for its lifecycle code.
    if (error instanceof LlmgwError) return error.code === "VALIDATION_FAILED" ? unprocessable(error) : errorResponse(error);
    if (code === "VALIDATION") {
      // A response that fails its own schema is our bug, not the client's.
      if ((error as { type?: unknown }).type === "response") {
        logger().error({ err: error }, `${o.api} answer does not match its schema`);
        return errorResponse(new LlmgwError("INTERNAL_ERROR", "the answer did not match its documented schema"));
      }
      return unprocessable(validationError(error, o.unknownField));
    }
    if (code === "PARSE") return errorResponse(new LlmgwError("INVALID_JSON", "request body is not valid JSON"));
    if (code === "NOT_FOUND") return undefined;
    logger().error({ err: error }, `${o.api} request failed`);
    return errorResponse(asLlmgwError(error));
  };
}
