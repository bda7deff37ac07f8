/** Errors in the shape of Anthropic's Messages API (`{"type":"error","error":{"type","message"}}`), typed by HTTP status as Anthropic's API documents them. */

/** Anthropic's error type for an HTTP status (docs.anthropic.com "Errors"; 503 and 529 are both "overloaded"). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 400:
    case 405:
    case 408:
    case 409:
    case 422:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 402:
      return "billing_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    case 504:
      return "timeout_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

export function anthropicErrorBody(status: number, message: string): { type: "error"; error: { type: string; message: string } } {
  return { type: "error", error: { type: anthropicErrorType(status), message } };
}
