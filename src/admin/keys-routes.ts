/**
 * The keys API on the admin listener (/admin/v1/keys): create a live API key
 * (its secret in that answer only), list keys (live and the config's, no
 * secret), change a key's limits and models, rotate (a grace period for the
 * old secret), revoke, and read a key's usage. Writes pass the admin door
 * (admin token, same origin, JSON); bodies are bounded, unknown fields
 * refused, and every refusal is OpenAI-shaped. A change is in the state
 * backend before the answer, and this gateway uses it at once; the others
 * within about a second (src/keys/live-keys.ts).
 */
import { Elysia } from "elysia";
import { z } from "zod";
import { errorSchema } from "../control/fleet-api-schemas.ts";
import type { Authenticator, Principal } from "../gateway/api-keys.ts";
import {
  createKeyBodySchema,
  type KeyView,
  keyUsageSchema,
  keyView,
  keyViewSchema,
  keyWithSecretSchema,
  LIVE_KEY_ID,
  type LiveKeyRecord,
  newKeyId,
  newSecret,
  rotateKeyBodySchema,
  updateKeyBodySchema,
  YAML_KEY_ID_PREFIX,
} from "../keys/live-key.ts";
import type { LiveKeys } from "../keys/live-keys.ts";
import { readBodyChunks } from "../shared/bounded-body.ts";
import { LlmgwError } from "../shared/errors.ts";
import { managementApiErrors } from "../shared/management-api-errors.ts";
import { quotedName } from "../shared/model-name.ts";

export const KEYS_API_PREFIX = "/admin/v1/keys";
/** A key's body is a few hundred bytes; 64 KiB leaves room for a long model list and refuses a flood before it is held. */
const MAX_KEYS_BODY_BYTES = 64 * 1024;
/** Live keys a backend holds at most: each one is in every gateway's memory and read again on every change. */
const MAX_LIVE_KEYS = 10_000;

interface KeysRoutesDeps {
  auth: Pick<Authenticator, "configKeys" | "hasBand">;
  liveKeys: Pick<LiveKeys<readonly Principal[]>, "store" | "refresh" | "flush">;
}

/** The body, read under MAX_KEYS_BODY_BYTES whether or not it declared its length, and parsed as JSON ({} when empty). */
async function boundedJson(request: Request): Promise<unknown> {
  const tooLarge = () => new LlmgwError("BODY_TOO_LARGE", `a keys API body is at most ${MAX_KEYS_BODY_BYTES} bytes`);
  const declared = Number(request.headers.get("content-length") ?? 0);
  if (declared > MAX_KEYS_BODY_BYTES) throw tooLarge();
  const chunks: Uint8Array[] = [];
  for await (const chunk of readBodyChunks(request, MAX_KEYS_BODY_BYTES, tooLarge)) chunks.push(chunk);
  const text = Buffer.concat(chunks).toString("utf8").trim();
  if (text === "") return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new LlmgwError("INVALID_JSON", "request body is not valid JSON");
  }
}

function configKeyRefusal(id: string, what: string): LlmgwError {
  return new LlmgwError(
    "CONFLICT",
    `key '${id}' comes from auth.keys in the config file: the keys API cannot ${what} it. Remove or change it in the file (then reload or restart the gateway), or replace it with a live key.`,
    { param: "id" },
  );
}

const tags = ["keys"];
const writeNote = "Needs `Authorization: Bearer <admin token>`.";
const idParam = z.object({ id: z.string() });

export function keysRoutes(deps: KeysRoutesDeps) {
  const { auth, liveKeys } = deps;
  const store = () => liveKeys.store;
  const configView = (id: string): KeyView | undefined => {
    const k = auth.configKeys().find((c) => c.id === id);
    return k === undefined
      ? undefined
      : {
          id: k.id,
          name: "(config file)",
          tenant: k.tenant,
          source: "config",
          prefix: null,
          max_band: k.maxBand,
          state: "active",
          created_ms: null,
          last_used_ms: null,
          requests_per_minute: null,
          tokens_per_minute: null,
          models: null,
          grace_until_ms: null,
        };
  };
  /** The live key `id`; a config key's id is refused with why (`what`: the change asked for). */
  const live = async (id: string, what: string): Promise<LiveKeyRecord> => {
    if (id.startsWith(YAML_KEY_ID_PREFIX) && configView(id) !== undefined) throw configKeyRefusal(id, what);
    const r = LIVE_KEY_ID.test(id) ? await store().get(id) : undefined;
    if (r === undefined) throw new LlmgwError("NOT_FOUND", `no API key ${quotedName(id)}`, { param: "id" });
    return r;
  };
  const viewOf = async (r: LiveKeyRecord): Promise<KeyView> => keyView(r, (await store().usage([r.id])).get(r.id)!, Date.now());
  /** Store, then use it here at once (the other gateways within a refresh interval). */
  const write = async (r: LiveKeyRecord): Promise<void> => {
    await store().put(r);
    await liveKeys.refresh(true);
  };
  const checkBand = (band: string | null | undefined) => {
    if (band != null && !auth.hasBand(band))
      throw new LlmgwError("VALIDATION_FAILED", `max_band: no band ${quotedName(band)} in admission.bands`, { param: "max_band" });
  };

  return new Elysia({ name: "llmgw-keys-api", prefix: KEYS_API_PREFIX })
    .onParse(async function keysApiBody({ request }) {
      return boundedJson(request);
    })
    .onError(
      managementApiErrors({
        api: "keys API",
        unknownField: (field) => `unknown field '${field}' (refused, not ignored: a misspelt limit must not mean none; the fields are in /openapi)`,
      }),
    )
    .get(
      "",
      async () => {
        const records = await store().list();
        const usage = await store().usage(records.map((r) => r.id));
        const now = Date.now();
        const views = records.map((r) => keyView(r, usage.get(r.id)!, now));
        return { keys: [...auth.configKeys().map((k) => configView(k.id)!), ...views] };
      },
      {
        response: z.object({ keys: z.array(keyViewSchema) }),
        detail: { tags, summary: "Every API key: the config's (auth.keys) and the live ones, with limits, state and last use; never a secret" },
      },
    )
    .post(
      "",
      async ({ body, set }) => {
        checkBand(body.max_band);
        if ((await store().list()).length >= MAX_LIVE_KEYS)
          throw new LlmgwError("CONFLICT", `this gateway's state holds ${MAX_LIVE_KEYS} live keys already (the most it keeps): revoked keys still count`);
        const now = Date.now();
        const { secret, stored } = newSecret(now);
        const record: LiveKeyRecord = {
          id: newKeyId(),
          name: body.name,
          tenant: body.tenant,
          max_band: body.max_band ?? null,
          secrets: [stored],
          created_ms: now,
          revoked_ms: null,
          requests_per_minute: body.requests_per_minute ?? null,
          tokens_per_minute: body.tokens_per_minute ?? null,
          models: body.models ?? null,
        };
        await write(record);
        set.status = 201;
        return { ...(await viewOf(record)), secret };
      },
      {
        body: createKeyBodySchema,
        response: { 201: keyWithSecretSchema, 401: errorSchema, 409: errorSchema, 413: errorSchema, 422: errorSchema },
        detail: {
          tags,
          summary: "Create a live API key: the secret is in this answer only (the state backend keeps its SHA-256)",
          description: writeNote,
        },
      },
    )
    .get(
      "/:id",
      async ({ params }) => {
        const config = configView(params.id);
        return config ?? viewOf(await live(params.id, "read"));
      },
      { params: idParam, response: { 200: keyViewSchema, 404: errorSchema }, detail: { tags, summary: "One key (no secret)" } },
    )
    .patch(
      "/:id",
      async ({ params, body }) => {
        const r = await live(params.id, "change");
        if (r.revoked_ms !== null) throw new LlmgwError("CONFLICT", `key '${r.id}' is revoked: it cannot be changed`, { param: "id" });
        const next: LiveKeyRecord = {
          ...r,
          name: body.name ?? r.name,
          requests_per_minute: body.requests_per_minute === undefined ? r.requests_per_minute : body.requests_per_minute,
          tokens_per_minute: body.tokens_per_minute === undefined ? r.tokens_per_minute : body.tokens_per_minute,
          models: body.models === undefined ? r.models : body.models,
        };
        await write(next);
        return viewOf(next);
      },
      {
        params: idParam,
        body: updateKeyBodySchema,
        response: { 200: keyViewSchema, 401: errorSchema, 404: errorSchema, 409: errorSchema, 422: errorSchema },
        detail: { tags, summary: "Change a live key's name, limits (null: none) or model allow-list (null: every model)", description: writeNote },
      },
    )
    .post(
      "/:id/rotate",
      async ({ params, body }) => {
        const r = await live(params.id, "rotate");
        if (r.revoked_ms !== null) throw new LlmgwError("CONFLICT", `key '${r.id}' is revoked: it cannot be rotated`, { param: "id" });
        const now = Date.now();
        const graceEnd = now + Math.round((body?.grace_s ?? 0) * 1000);
        const { secret, stored } = newSecret(now);
        // Earlier secrets work until the grace period ends (one already ending sooner keeps its end); with no grace they stop now.
        const kept = r.secrets
          .map((s) => ({ ...s, expires_ms: Math.min(s.expires_ms ?? Number.POSITIVE_INFINITY, graceEnd) }))
          .filter((s) => s.expires_ms > now);
        const next: LiveKeyRecord = { ...r, secrets: [...kept, stored] };
        await write(next);
        return { ...(await viewOf(next)), secret };
      },
      {
        params: idParam,
        body: rotateKeyBodySchema,
        response: { 200: keyWithSecretSchema, 401: errorSchema, 404: errorSchema, 409: errorSchema, 422: errorSchema },
        detail: {
          tags,
          summary: "Rotate: a new secret (in this answer only); the old one keeps working for grace_s seconds (default 0: it stops now)",
          description: writeNote,
        },
      },
    )
    .post(
      "/:id/revoke",
      async ({ params }) => {
        const r = await live(params.id, "revoke");
        const next: LiveKeyRecord = r.revoked_ms === null ? { ...r, revoked_ms: Date.now() } : r;
        if (next !== r) await write(next);
        return viewOf(next);
      },
      {
        params: idParam,
        response: { 200: keyViewSchema, 401: errorSchema, 404: errorSchema, 409: errorSchema },
        detail: { tags, summary: "Revoke a live key: every gateway refuses it (401) within about a second; its usage stays readable", description: writeNote },
      },
    )
    .get(
      "/:id/usage",
      async ({ params }) => {
        const r = await live(params.id, "count the usage of");
        // What this gateway counted since its last flush goes first, so its own requests are in the answer.
        await liveKeys.flush();
        const u = (await store().usage([r.id])).get(r.id)!;
        return { id: r.id, requests: u.requests, tokens_in: u.tokens_in, tokens_out: u.tokens_out, last_used_ms: u.last_used_ms };
      },
      {
        params: idParam,
        response: { 200: keyUsageSchema, 404: errorSchema, 409: errorSchema },
        detail: { tags, summary: "A live key's usage summed over every gateway: inference requests, tokens in (prompt) and out (completion), last use" },
      },
    );
}
