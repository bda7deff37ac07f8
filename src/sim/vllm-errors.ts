/**
 * Errors as vLLM's OpenAI server writes them: `{"error":{"message","type",
 * "param","code"}}` where `code` is the numeric HTTP status and `type` a
 * class-like name (vllm/entrypoints/openai/protocol.py ErrorInfo/ErrorResponse,
 * create_error_response in serving_engine.py). This differs on purpose from
 * llmgw's own error shape (src/shared/errors.ts): the sim imitates the engine.
 */

type VllmErrorType = "BadRequestError" | "InvalidUserInput" | "NotFoundError" | "RateLimitError" | "InternalServerError" | "ServiceUnavailableError";

export class SimHttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: VllmErrorType,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = "SimHttpError";
  }
}

export function badRequest(message: string, param: string | null = null): SimHttpError {
  return new SimHttpError(400, "BadRequestError", message, param);
}

function vllmErrorBody(status: number, type: VllmErrorType, message: string, param: string | null = null): string {
  return JSON.stringify({ error: { message, type, param, code: status } });
}

export function vllmErrorResponse(err: SimHttpError, headers: Record<string, string> = {}): Response {
  return new Response(vllmErrorBody(err.status, err.type, err.message, err.param), {
    status: err.status,
    headers: { "content-type": "application/json", ...headers },
  });
}

/** FastAPI's answer for a path nothing serves (vLLM runs on FastAPI). */
export function fastapiNotFound(): Response {
  return new Response('{"detail":"Not Found"}', { status: 404, headers: { "content-type": "application/json" } });
}

export function fastapiMethodNotAllowed(allow: string): Response {
  return new Response('{"detail":"Method Not Allowed"}', { status: 405, headers: { "content-type": "application/json", allow } });
}
