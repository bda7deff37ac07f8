/**
 * The admin listener's door, checked before any route runs. The listener
 * holds the management API, diagnostics and the dashboard, and an operator's
 * browser can reach it; so a web page the operator opens must not be able to
 * use it:
 *
 * - Host: a DNS-rebinding page reaches the listener under the attacker's own
 *   name, so every request (read or write) must name a host the listener
 *   answers for — its own address, a loopback name, on a wildcard address an
 *   IP literal or the machine's name, or a name in admin.allowed_hosts —
 *   else 421. A request without Host (HTTP/1.0) is no browser's.
 * - Writes (any method but GET, HEAD, OPTIONS): an Origin other than the
 *   listener's own, or a Sec-Fetch-Site that is not same-origin, is a page
 *   of another origin (403); a body that is not JSON is a form or a no-cors
 *   request (415); and every write needs the admin token (401), except the
 *   paths that carry their own credential (agent registration).
 *
 * A refusal closes the connection. Pure: the Elysia wiring is one onRequest.
 */
import { isIP } from "node:net";
import { hostname as osHostname } from "node:os";
import type { AdminRefusal } from "../metrics/names.ts";
import { tokenMatches } from "../shared/bearer.ts";
import { type ErrorCode, errorResponse, LlmgwError } from "../shared/errors.ts";

interface AdminDoorOptions {
  /** The admin token; undefined: every write is refused. */
  token: string | undefined;
  /** Lower-case host names allowed besides the listener's own (admin.allowed_hosts). */
  allowedHosts: readonly string[];
  /** The address the listener is bound to (config admin_listen). */
  listenHost: string;
  /** Paths whose writes carry another credential the route checks itself (agent registration). */
  ownCredentialPaths: readonly string[];
  /**
   * Path prefixes answered only with what is missing (the management API on a
   * gateway that runs no fleet manager): nothing can change there, so no
   * token is asked for and the caller learns what is really wrong.
   */
  inertPrefixes?: readonly string[];
  /** Told each refusal (the refusals counter). */
  onRefusal?: (reason: AdminRefusal) => void;
  /** The machine's host name (tests); default os.hostname(). */
  machineName?: string;
}

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);
const WILDCARDS = new Set(["0.0.0.0", "::", ""]);

/** The host name of a Host header value (no port, no IPv6 brackets, lower case, no trailing dot); null when unusable. */
export function hostNameOf(host: string): string | null {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) {
    const end = h.indexOf("]");
    return end > 1 ? h.slice(1, end) : null;
  }
  const colon = h.indexOf(":");
  const name = (colon < 0 ? h : h.slice(0, colon)).replace(/\.$/, "");
  return name === "" ? null : name;
}

function isLoopback(name: string): boolean {
  return name === "localhost" || name === "::1" || (isIP(name) === 4 && name.startsWith("127."));
}

/** The names this listener answers for, as a predicate over a lower-case host name. */
export function hostAllowed(opts: Pick<AdminDoorOptions, "allowedHosts" | "listenHost" | "machineName">): (name: string) => boolean {
  const allowed = new Set(opts.allowedHosts);
  const listen = opts.listenHost.toLowerCase();
  const wildcard = WILDCARDS.has(listen);
  const machine = (opts.machineName ?? osHostname()).toLowerCase();
  const machineNames = new Set([machine, machine.split(".")[0]!]);
  return (name) => {
    if (allowed.has(name) || isLoopback(name) || name === listen) return true;
    // Bound to every address: any of them may be in the Host, and an IP literal cannot be a rebinding name.
    return wildcard && (isIP(name) !== 0 || machineNames.has(name));
  };
}

/** Default ports by scheme, to compare an Origin with a Host that leaves its port out. */
function portOf(port: string, scheme: string): string {
  return port !== "" ? port : scheme === "https:" ? "443" : "80";
}

/** Whether `origin` (an Origin header) is the origin the request was sent to (its Host), or a name the operator allowed. */
function sameOrigin(origin: string, host: string | null, allowed: readonly string[]): boolean {
  let u: URL;
  try {
    u = new URL(origin);
  } catch {
    return false; // "null" (a sandboxed frame, a file: page) and anything unparsable
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return false;
  const name = u.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (allowed.includes(name)) return true;
  if (host === null) return false;
  const hostName = hostNameOf(host);
  const hostPort = /:(\d+)$/.exec(host.trim())?.[1] ?? "";
  return hostName === name && portOf(hostPort, u.protocol) === portOf(u.port, u.protocol);
}

/** The media type of a Content-Type header (lower case, no parameters). */
function mediaType(contentType: string): string {
  return contentType.split(";")[0]!.trim().toLowerCase();
}

function declaresBody(headers: Headers): boolean {
  const length = headers.get("content-length");
  return (length !== null && length !== "0") || headers.has("transfer-encoding");
}

/** The request's path, whether Bun gave an absolute URL or (no Host) a relative one. */
function pathOf(url: string): string {
  return new URL(url, "http://host.invalid").pathname;
}

/** The check as a function of the request: a refusal to send, or undefined to let the routes answer. */
export function adminRequestGuard(opts: AdminDoorOptions): (request: Request) => Response | undefined {
  const allowedHost = hostAllowed(opts);
  const refuse = (reason: AdminRefusal, code: ErrorCode, message: string, headers: Record<string, string> = {}): Response => {
    opts.onRefusal?.(reason);
    return errorResponse(new LlmgwError(code, message), { connection: "close", ...headers });
  };
  return function adminDoor(request: Request): Response | undefined {
    const { headers } = request;
    const host = headers.get("host");
    if (host !== null) {
      const name = hostNameOf(host);
      if (name === null || !allowedHost(name)) {
        return refuse(
          "host",
          "HOST_NOT_ALLOWED",
          `this admin listener does not answer for the host '${host.slice(0, 100)}'; an operator who reaches it under that name adds it to admin.allowed_hosts`,
        );
      }
    }
    if (SAFE_METHODS.has(request.method)) return undefined;

    const site = headers.get("sec-fetch-site");
    if (site !== null && site !== "same-origin" && site !== "none")
      return refuse("origin", "CROSS_ORIGIN_REFUSED", `a ${site} request cannot change state on the admin listener`);
    const origin = headers.get("origin");
    if (origin !== null && !sameOrigin(origin, host, opts.allowedHosts)) {
      return refuse("origin", "CROSS_ORIGIN_REFUSED", `a request from the origin '${origin.slice(0, 100)}' cannot change state on the admin listener`);
    }
    const contentType = headers.get("content-type");
    if ((contentType !== null && mediaType(contentType) !== "application/json") || (contentType === null && declaresBody(headers))) {
      return refuse("media_type", "UNSUPPORTED_MEDIA_TYPE", "the admin listener takes JSON bodies only (Content-Type: application/json)");
    }
    const path = pathOf(request.url);
    if (opts.ownCredentialPaths.includes(path)) return undefined;
    if (opts.inertPrefixes?.some((prefix) => path === prefix || path.startsWith(`${prefix}/`))) return undefined;
    if (opts.token === undefined)
      return refuse("token", "UNAUTHORIZED", "admin changes are off: no admin token is configured (admin.token or fleet.admin_token)");
    const authorization = headers.get("authorization");
    if (!tokenMatches(authorization, opts.token)) {
      return refuse("token", "UNAUTHORIZED", authorization === null ? "this change needs the admin token (Authorization: Bearer …)" : "wrong admin token", {
        "www-authenticate": "Bearer",
      });
    }
    return undefined;
  };
}
