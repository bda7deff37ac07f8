/** `llmgw ctl keys …`: live API keys through the admin listener's keys API (create, list, set, rotate, revoke, usage). */
import { z } from "zod";
import { KEYS_API_PREFIX } from "../admin/keys-routes.ts";
import { type KeyView, keyUsageSchema, keyViewSchema, keyWithSecretSchema } from "../keys/live-key.ts";
import { numberFlag, type ParsedArgs, stringFlag, UsageError } from "../shared/flags.ts";
import { renderTable } from "../shared/text-table.ts";
import { CTL_EXIT, CtlClient } from "./client.ts";
import { age, dash } from "./format.ts";

export const KEYS_USAGE = `  keys list                   API keys, the config's and the live ones: id, name, tenant, prefix,
                              limits, models, state, last use (never a secret)
  keys create --name NAME --tenant TENANT [--max-band BAND] [--rpm N] [--tpm N] [--models A,B]
                              create a live key; its secret is printed once and never again
  keys set ID [--name NAME] [--rpm N|none] [--tpm N|none] [--models A,B|all]
                              change a live key's name, limits or model allow-list
  keys rotate ID [--grace-s S]
                              a new secret (printed once); the old one works S more seconds (default 0)
  keys revoke ID              every gateway refuses the key within about a second
  keys usage ID               requests and tokens in/out under the key, summed over every gateway`;

/** The flags only `ctl keys` takes. */
export const KEYS_OPTIONS = {
  name: { type: "string" },
  tenant: { type: "string" },
  "max-band": { type: "string" },
  rpm: { type: "string" },
  tpm: { type: "string" },
  models: { type: "string" },
  "grace-s": { type: "string" },
} as const;

const SUB: Record<string, { id: boolean; flags: (keyof typeof KEYS_OPTIONS)[] }> = {
  list: { id: false, flags: [] },
  create: { id: false, flags: ["name", "tenant", "max-band", "rpm", "tpm", "models"] },
  set: { id: true, flags: ["name", "rpm", "tpm", "models"] },
  rotate: { id: true, flags: ["grace-s"] },
  revoke: { id: true, flags: [] },
  usage: { id: true, flags: [] },
};

/** A limit flag: a whole number, or "none" to remove it (set only); undefined when not given. */
function limitFlag(args: ParsedArgs, name: string, clearable: boolean): number | null | undefined {
  const v = stringFlag(args, name);
  if (v === undefined) return undefined;
  if (clearable && v === "none") return null;
  if (!/^\d+$/.test(v) || Number(v) < 1) throw new UsageError(`--${name} must be a whole number of at least 1${clearable ? ", or none" : ""}, got '${v}'`);
  return Number(v);
}

function modelsFlag(args: ParsedArgs, clearable: boolean): string[] | null | undefined {
  const v = stringFlag(args, "models");
  if (v === undefined) return undefined;
  if (clearable && v === "all") return null;
  const models = v.split(",").map((m) => m.trim());
  if (models.some((m) => m === "")) throw new UsageError(`--models takes model names separated by commas, got '${v}'`);
  return models;
}

function formatKeys(keys: readonly KeyView[], colour: boolean): string {
  if (keys.length === 0) return "no API keys (auth.keys in the config, or llmgw ctl keys create)";
  const now = Date.now();
  return renderTable(
    ["ID", "NAME", "TENANT", "SOURCE", "PREFIX", "STATE", "RPM", "TPM", "MODELS", "CREATED", "LAST USED"],
    keys.map((k) => [
      k.id,
      k.name,
      k.tenant,
      k.source,
      dash(k.prefix),
      k.state === "active" ? { text: k.grace_until_ms === null ? "active" : "active (rotating)", tint: "green" } : { text: k.state, tint: "red" },
      dash(k.requests_per_minute),
      dash(k.tokens_per_minute),
      k.models === null ? "all" : k.models.join(","),
      k.created_ms === null ? "-" : new Date(k.created_ms).toISOString().slice(0, 19).replace("T", " "),
      age(k.last_used_ms === null ? null : now - k.last_used_ms),
    ]),
    { colour },
  );
}

/** Runs `ctl keys SUB [ID]`; `params` are the positionals after "keys". */
export async function runKeys(
  params: readonly string[],
  args: ParsedArgs,
  opts: { gateway: string; token: string | undefined; json: boolean; colour: boolean; out: (text: string) => void },
): Promise<number> {
  const [sub, id, ...rest] = params;
  if (sub === undefined) throw new UsageError("keys takes a sub-command: list, create, set, rotate, revoke or usage");
  const spec = SUB[sub];
  if (spec === undefined) throw new UsageError(`unknown keys sub-command '${sub}'`);
  if (spec.id ? id === undefined || rest.length > 0 : id !== undefined) throw new UsageError(`keys ${sub} takes ${spec.id ? "one key id" : "no arguments"}`);
  for (const f of Object.keys(KEYS_OPTIONS) as (keyof typeof KEYS_OPTIONS)[])
    if (args.values[f] !== undefined && !spec.flags.includes(f)) throw new UsageError(`--${f} does not apply to keys ${sub}`);
  const client = new CtlClient(opts.gateway, opts.token, KEYS_API_PREFIX);
  const show = (value: unknown, text: () => string) => opts.out(opts.json ? JSON.stringify(value, null, 2) : text());
  const path = `/${encodeURIComponent(id ?? "")}`;
  const once = (secret: string) => `secret (shown this once; only its SHA-256 is kept): ${secret}`;
  switch (sub) {
    case "list": {
      const r = await client.call("GET", "", z.object({ keys: z.array(keyViewSchema) }));
      show(r, () => formatKeys(r.keys, opts.colour));
      return CTL_EXIT.ok;
    }
    case "create": {
      const name = stringFlag(args, "name");
      const tenant = stringFlag(args, "tenant");
      if (name === undefined || tenant === undefined) throw new UsageError("keys create needs --name and --tenant");
      const body: Record<string, unknown> = { name, tenant };
      const maxBand = stringFlag(args, "max-band");
      if (maxBand !== undefined) body.max_band = maxBand;
      const rpm = limitFlag(args, "rpm", false);
      const tpm = limitFlag(args, "tpm", false);
      const models = modelsFlag(args, false);
      if (rpm !== undefined) body.requests_per_minute = rpm;
      if (tpm !== undefined) body.tokens_per_minute = tpm;
      if (models !== undefined) body.models = models;
      const r = await client.call("POST", "", keyWithSecretSchema, body);
      show(r, () => `${formatKeys([r], opts.colour)}\n\n${once(r.secret)}`);
      return CTL_EXIT.ok;
    }
    case "set": {
      const body: Record<string, unknown> = {};
      const name = stringFlag(args, "name");
      if (name !== undefined) body.name = name;
      const rpm = limitFlag(args, "rpm", true);
      const tpm = limitFlag(args, "tpm", true);
      const models = modelsFlag(args, true);
      if (rpm !== undefined) body.requests_per_minute = rpm;
      if (tpm !== undefined) body.tokens_per_minute = tpm;
      if (models !== undefined) body.models = models;
      if (Object.keys(body).length === 0) throw new UsageError("keys set needs at least one of --name, --rpm, --tpm, --models");
      const r = await client.call("PATCH", path, keyViewSchema, body);
      show(r, () => formatKeys([r], opts.colour));
      return CTL_EXIT.ok;
    }
    case "rotate": {
      const graceS = args.values["grace-s"] === undefined ? undefined : numberFlag(args, "grace-s", 0, { min: 0, max: 30 * 86_400 });
      const r = await client.call("POST", `${path}/rotate`, keyWithSecretSchema, graceS === undefined ? {} : { grace_s: graceS });
      const grace = r.grace_until_ms === null ? "the old secret stopped working" : `the old secret works until ${new Date(r.grace_until_ms).toISOString()}`;
      show(r, () => `${r.id} rotated: ${grace}\n${once(r.secret)}`);
      return CTL_EXIT.ok;
    }
    case "revoke": {
      const r = await client.call("POST", `${path}/revoke`, keyViewSchema);
      show(r, () => `${r.id} revoked: every gateway refuses it within about a second`);
      return CTL_EXIT.ok;
    }
    default: {
      const r = await client.call("GET", `${path}/usage`, keyUsageSchema);
      show(r, () =>
        renderTable(
          ["ID", "REQUESTS", "TOKENS IN", "TOKENS OUT", "LAST USED"],
          [[r.id, r.requests, r.tokens_in, r.tokens_out, age(r.last_used_ms === null ? null : Date.now() - r.last_used_ms)]],
          { colour: opts.colour },
        ),
      );
      return CTL_EXIT.ok;
    }
  }
}
