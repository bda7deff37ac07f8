/**
 * `llmgw ctl`'s HTTP client for the management API. Every failure becomes a
 * CtlError carrying the exit code that tells scripts what went wrong: the
 * gateway unreachable, the token refused, no such node or model, a change
 * refused, or anything else. Answers are checked against the API's own
 * schemas, so a gateway of another version is an error, not a wrong table.
 */
import type { z } from "zod";
import { FLEET_API_PREFIX } from "../control/fleet-api-schemas.ts";
import { errorBodyMessage } from "../shared/errors.ts";

/** Exit codes of `llmgw ctl` (2 is a usage error, as for every llmgw command). */
export const CTL_EXIT = {
  ok: 0,
  error: 1,
  usage: 2,
  unreachable: 4,
  unauthorized: 5,
  notFound: 6,
  rejected: 7,
} as const;

export class CtlError extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
    this.name = "CtlError";
  }
}

const CALL_TIMEOUT_MS = 15_000;

export class CtlClient {
  constructor(
    private readonly gateway: string,
    private readonly token: string | undefined,
    /** The API's path prefix: the management API's, or the keys API's. */
    private readonly prefix: string = FLEET_API_PREFIX,
  ) {}

  /** A call to this client's API (`path` under its prefix: the management API's or the keys API's). */
  call<S extends z.ZodType>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, schema: S, body?: unknown): Promise<z.output<S>> {
    return this.callAt(method, `${this.prefix}${path}`, schema, body);
  }

  /** A call to any admin route (`path` from the listener's root). */
  async callAt<S extends z.ZodType>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, schema: S, body?: unknown): Promise<z.output<S>> {
    const url = new URL(path, this.gateway).toString();
    const headers: Record<string, string> = {};
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, { method, headers, signal: AbortSignal.timeout(CALL_TIMEOUT_MS), ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      text = await res.text();
    } catch (err) {
      throw new CtlError(CTL_EXIT.unreachable, `cannot reach the gateway at ${this.gateway}: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (res.status === 401)
      throw new CtlError(CTL_EXIT.unauthorized, `the gateway refused the token: ${errorBodyMessage(text)} (give --token or LLMGW_ADMIN_TOKEN)`);
    if (res.status === 404) throw new CtlError(CTL_EXIT.notFound, errorBodyMessage(text));
    if (res.status === 400 || res.status === 409 || res.status === 422) throw new CtlError(CTL_EXIT.rejected, `refused: ${errorBodyMessage(text)}`);
    if (res.status < 200 || res.status > 299) throw new CtlError(CTL_EXIT.error, `HTTP ${res.status} from ${url}: ${errorBodyMessage(text)}`);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new CtlError(CTL_EXIT.error, `${url} answered something that is not JSON (is ${this.gateway} an llmgw admin listener?)`);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new CtlError(
        CTL_EXIT.error,
        `${url}: unexpected answer (${issue?.path.join(".") || "(root)"}: ${issue?.message}); is the gateway the same llmgw version?`,
      );
    }
    return parsed.data;
  }
}
