/** An endpoint's credentials toward its engine (api_key_env, api_key_file, headers): the wire keys, their checks, and the headers they resolve to. */
import { readFileSync } from "node:fs";
import { z } from "zod";

/** RFC 9110 §5.6.2 `token`: what a header field name may be made of. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Names llmgw owns on every upstream request: hop-by-hop fields (RFC 9110
 * §7.6.1), the framing and target fields the runtime writes itself, and the
 * credential and request fields set from api_key_env/api_key_file and the
 * request. Setting one by hand would break the request or smuggle a second
 * credential past the key settings.
 */
const REFUSED_HEADERS: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "content-type",
  "expect",
  "authorization",
  "x-request-id",
]);

const envName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { message: "expected an environment variable name" });

const headerMap = z.record(z.string(), z.string()).superRefine((headers, ctx) => {
  for (const [name, value] of Object.entries(headers)) {
    if (!HEADER_NAME.test(name)) ctx.addIssue({ code: "custom", path: [name], message: "expected a header name (RFC 9110 token characters)" });
    else if (REFUSED_HEADERS.has(name.toLowerCase()))
      ctx.addIssue({
        code: "custom",
        path: [name],
        message:
          name.toLowerCase() === "authorization"
            ? "set the key with api_key_env or api_key_file, not a header"
            : `'${name}' is set by llmgw itself and cannot be configured`,
      });
    // The value is never repeated in the message: it may be a secret.
    else if (/[\r\n\0]/.test(value)) ctx.addIssue({ code: "custom", path: [name], message: "a header value must not contain CR, LF or NUL" });
    else if (value.length > 8192) ctx.addIssue({ code: "custom", path: [name], message: "expected a header value of at most 8192 characters" });
  }
});

/** The keys an endpoint entry takes for its engine's credentials (spread into its schema). */
export const upstreamCredentialKeys = {
  /** The engine's API key is in this environment variable of the gateway (sent as `Authorization: Bearer …`). */
  api_key_env: envName.optional(),
  /** The engine's API key is in this file, read once at start (trimmed). */
  api_key_file: z.string().min(1).optional(),
  /** Extra headers sent with every request to this engine. */
  headers: headerMap.optional(),
};

interface CredentialWire {
  api_key_env?: string | undefined;
  api_key_file?: string | undefined;
  headers?: Record<string, string> | undefined;
}

type ReadKeyFile = (path: string) => string;

/** Key files hold one line; a longer one is a mistake (a certificate bundle, a binary) and not a key. */
const MAX_KEY_FILE_CHARS = 16 * 1024;

const readKeyFile: ReadKeyFile = (path) => readFileSync(path, "utf8");

/**
 * The headers every request to the engine carries, or the problems found
 * (each `at: message`, never the key). The key is read once, at start: a
 * rotated key takes a restart, as the engine itself needs one to change its
 * --api-key.
 */
export function resolveUpstreamHeaders(
  wire: CredentialWire,
  at: string,
  env: Record<string, string | undefined>,
  readFile: ReadKeyFile = readKeyFile,
): { headers: Record<string, string>; issues: string[] } {
  const headers: Record<string, string> = { ...wire.headers };
  const issues: string[] = [];
  let key: string | undefined;
  if (wire.api_key_env !== undefined && wire.api_key_file !== undefined) {
    issues.push(`${at}.api_key_env: give api_key_env or api_key_file, not both`);
  } else if (wire.api_key_env !== undefined) {
    key = env[wire.api_key_env]?.trim();
    if (!key) issues.push(`${at}.api_key_env: environment variable ${wire.api_key_env} is not set or empty`);
  } else if (wire.api_key_file !== undefined) {
    try {
      const text = readFile(wire.api_key_file);
      key = text.length > MAX_KEY_FILE_CHARS ? undefined : text.trim();
      if (text.length > MAX_KEY_FILE_CHARS)
        issues.push(`${at}.api_key_file: ${wire.api_key_file} is larger than a key (over ${MAX_KEY_FILE_CHARS} characters)`);
      else if (!key) issues.push(`${at}.api_key_file: ${wire.api_key_file} is empty`);
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      issues.push(`${at}.api_key_file: cannot read ${wire.api_key_file}${typeof code === "string" ? ` (${code})` : ""}`);
    }
  }
  if (key && /[\r\n\0]/.test(key)) {
    issues.push(`${at}.${wire.api_key_env !== undefined ? "api_key_env" : "api_key_file"}: the key spans several lines or holds NUL`);
    key = undefined;
  }
  if (key) headers.authorization = `Bearer ${key}`;
  return { headers, issues };
}
