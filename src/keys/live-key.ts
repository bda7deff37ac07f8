/** A live API key as the state backend stores it (only digests of its secrets), how a new secret is made, and the admin API's wire shapes for keys. */
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { id, modelName } from "../config/wire-primitives.ts";
import { modelNameProblem, quotedName } from "../shared/model-name.ts";

/** What every live secret starts with: recognisable in a leaked log or a secret scanner's rule. */
const SECRET_SCHEME = "llmgw-";
/**
 * 24 random bytes = 192 bits. A secret this long cannot be guessed or
 * brute-forced from its digest, which is why an unsalted SHA-256 (the digest
 * the YAML keys use, auth.keys[].key_sha256) is the right hash here: a slow
 * salted hash protects low-entropy passwords, and would turn the per-request
 * lookup (a Map on the digest) into a hash computation per stored key.
 */
const SECRET_BYTES = 24;
/** Characters of the secret kept in clear for recognition ("llmgw-" and 6 of 32 random characters: 36 of 192 bits). */
const PREFIX_CHARS = SECRET_SCHEME.length + 6;
/** Ids of live keys: "key_" and 16 hex digits; YAML keys are listed as "yaml_" and the first 16 hex digits of their digest. */
export const LIVE_KEY_ID = /^key_[0-9a-f]{16}$/;
export const YAML_KEY_ID_PREFIX = "yaml_";
const KEY_NAME_MAX_CHARS = 100;

/** One secret of a key: several at once only during a rotation's grace period. */
const storedSecretSchema = z.object({
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  prefix: z.string(),
  created_ms: z.number(),
  /** When this secret stops working (a rotation's grace period); null: while the key lives. */
  expires_ms: z.number().nullable(),
});

/** The stored record: the shape written to sqlite or Redis as JSON. */
export const liveKeyRecordSchema = z.object({
  id: z.string().regex(LIVE_KEY_ID),
  name: z.string(),
  tenant: z.string(),
  /** The highest band the key may use (a band name); null: admission's default band. */
  max_band: z.string().nullable(),
  secrets: z.array(storedSecretSchema),
  created_ms: z.number(),
  revoked_ms: z.number().nullable(),
  requests_per_minute: z.number().int().positive().nullable(),
  tokens_per_minute: z.number().int().positive().nullable(),
  /** The models the key may ask for (names or aliases as clients send them); null: every model. */
  models: z.array(z.string()).nullable(),
});
export type LiveKeyRecord = z.infer<typeof liveKeyRecordSchema>;

/** What a key has used, summed over every gateway. */
export interface KeyUsage {
  requests: number;
  tokens_in: number;
  tokens_out: number;
  last_used_ms: number | null;
}

export const NO_USAGE: KeyUsage = Object.freeze({ requests: 0, tokens_in: 0, tokens_out: 0, last_used_ms: null });

/** A new secret and what is stored of it. */
export function newSecret(now: number): { secret: string; stored: LiveKeyRecord["secrets"][number] } {
  const secret = SECRET_SCHEME + randomBytes(SECRET_BYTES).toString("base64url");
  return { secret, stored: { sha256: secretDigest(secret), prefix: secret.slice(0, PREFIX_CHARS), created_ms: now, expires_ms: null } };
}

/** The digest a presented key is looked up by: the same for YAML and live keys (api-keys.ts). */
function secretDigest(secret: string): string {
  return Bun.SHA256.hash(secret, "hex");
}

export function newKeyId(): string {
  return `key_${randomBytes(8).toString("hex")}`;
}

// --- the admin API's wire shapes (src/admin/keys-routes.ts, src/ctl/keys-command.ts) ---

/** A key's name: free text for people, printable (no controls, bidi overrides or line breaks in a table or a log). */
const keyName = z.string().superRefine((name, ctx) => {
  const problem = modelNameProblem(name);
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: `expected a printable name: ${quotedName(name)} ${problem}` });
  else if ([...name].length > KEY_NAME_MAX_CHARS) ctx.addIssue({ code: "custom", message: `expected at most ${KEY_NAME_MAX_CHARS} characters` });
});

const limits = {
  requests_per_minute: z.number().int().min(1).max(1e9).nullable().optional(),
  tokens_per_minute: z.number().int().min(1).max(1e12).nullable().optional(),
  models: z.array(modelName).min(1).max(256).nullable().optional(),
};

/** Unknown fields are refused (a misspelt limit must not silently mean "unlimited"). */
export const createKeyBodySchema = z.strictObject({
  name: keyName,
  tenant: id,
  max_band: z.string().max(32).nullable().optional(),
  ...limits,
});

export const updateKeyBodySchema = z.strictObject({ name: keyName.optional(), ...limits });

export const rotateKeyBodySchema = z
  .strictObject({
    grace_s: z
      .number()
      .min(0)
      .max(30 * 86_400)
      .optional(),
  })
  .optional();

export const keyViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  tenant: z.string(),
  source: z.enum(["live", "config"]).describe("live: created through this API; config: auth.keys in the config file (read-only here)"),
  prefix: z.string().nullable().describe("the first characters of the current secret, for recognition; null for a config key"),
  max_band: z.string().nullable(),
  state: z.enum(["active", "revoked"]),
  created_ms: z.number().nullable(),
  last_used_ms: z.number().nullable(),
  requests_per_minute: z.number().nullable(),
  tokens_per_minute: z.number().nullable(),
  models: z.array(z.string()).nullable().describe("the models this key may ask for; null: every model"),
  grace_until_ms: z.number().nullable().describe("an earlier secret still works until then (a rotation's grace period)"),
});
export type KeyView = z.infer<typeof keyViewSchema>;

export const keyWithSecretSchema = keyViewSchema.extend({
  secret: z.string().describe("the key itself: shown in this answer only, never again (only its SHA-256 is stored)"),
});

export const keyUsageSchema = z.object({
  id: z.string(),
  requests: z.number().int(),
  tokens_in: z.number().int(),
  tokens_out: z.number().int(),
  last_used_ms: z.number().nullable(),
});

/** The view of a stored record (no secret, no digest). */
export function keyView(r: LiveKeyRecord, usage: KeyUsage, now: number): KeyView {
  const current = r.secrets.find((s) => s.expires_ms === null) ?? r.secrets.at(-1);
  const grace = r.secrets.filter((s) => s.expires_ms !== null && s.expires_ms > now).map((s) => s.expires_ms!);
  return {
    id: r.id,
    name: r.name,
    tenant: r.tenant,
    source: "live",
    prefix: current?.prefix ?? null,
    max_band: r.max_band,
    state: r.revoked_ms === null ? "active" : "revoked",
    created_ms: r.created_ms,
    last_used_ms: usage.last_used_ms,
    requests_per_minute: r.requests_per_minute,
    tokens_per_minute: r.tokens_per_minute,
    models: r.models,
    grace_until_ms: r.revoked_ms === null && grace.length > 0 ? Math.max(...grace) : null,
  };
}
