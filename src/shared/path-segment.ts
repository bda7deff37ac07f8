/** Percent-decoding of URL paths that never throws: a malformed escape is the client's 400, not the server's 500. */
import { LlmgwError } from "./errors.ts";

/**
 * A path segment percent-decoded (RFC 3986 §2.1), or undefined when an
 * escape is malformed: `%zz`, a cut `%E0%A4%A`, or bytes that are not UTF-8
 * (decodeURIComponent throws a URIError for each).
 */
export function decodePathSegment(segment: string): string | undefined {
  if (!segment.includes("%")) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** 400 INVALID_REQUEST when some segment of `path` has a malformed percent-escape; undefined when every one decodes. */
export function malformedPathError(path: string): LlmgwError | undefined {
  if (!path.includes("%")) return undefined;
  for (const segment of path.split("/")) {
    if (decodePathSegment(segment) === undefined) {
      return new LlmgwError(
        "INVALID_REQUEST",
        `the path '${path.slice(0, 200)}' has a malformed percent-encoding (RFC 3986 §2.1: '%' and two hex digits, of UTF-8 bytes)`,
      );
    }
  }
  return undefined;
}
