/**
 * The routing policies `llmgw bench routing` compares, as data: each file
 * in bench/routing-policies/ is one policy, named after the file, holding
 * the part of a gateway config that makes it (its `scheduling:` block,
 * usually) and, where a policy needs them, flags for its engines and keys
 * for each endpoint entry. A scorer or picker that no file uses gets a
 * policy of its own, derived from llmgw's default profile (the scorer in
 * place of prefix-affinity, at its weight; the picker in place of
 * max-score), so a plugin added to the registry is measured without
 * touching the bench. A file named like a derived policy replaces it.
 */
import { readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { buildConfig, ConfigError } from "../../config/load.ts";
import { PICKER_NAMES, SCORER_NAMES } from "../../config/plugin-names.ts";
import { schedulingSchema } from "../../config/schema.ts";
import { UsageError } from "../../shared/flags.ts";
import { REPO_ROOT } from "../../shared/llmgw-child.ts";
import { MAX_CONFIG_FILE_BYTES, readInputFile } from "../input-file.ts";
import { PUBLISHED_SCHEDULERS, type PublishedScheduler } from "./published-37-capacity.ts";

export const POLICY_DIR = join(REPO_ROOT, "bench", "routing-policies");

/** Policies without an `order` sort after those with one. */
const DEFAULT_ORDER = 100;
/** The default profile's prefix scorer, which a derived scorer policy replaces. */
const DEFAULT_PREFIX_SCORER = "precise-prefix";
/** A derived policy's scorer weight when the default has no prefix scorer to take it from. */
const DERIVED_SCORER_WEIGHT = 3;

const policyFile = z
  .object({
    description: z.string().min(1),
    /** The published scheduler it stands beside: precise, estimated, random or load. */
    published: z.enum(PUBLISHED_SCHEDULERS).optional(),
    /** Place in the table (smaller first); then by name. */
    order: z.number().optional(),
    /** Gateway config keys (listeners and endpoints are the bench's). */
    gateway: z.record(z.string(), z.unknown()).default({}),
    /** Extra sim-engine flags for this policy's engines, after the bench's own. */
    engine_args: z.string().default(""),
    /** Keys added to each endpoint entry; "{engine.NAME}" in a string is that engine's listener URL named NAME. */
    endpoint: z.record(z.string(), z.unknown()).default({}),
  })
  .strict();

export interface RoutingPolicy {
  name: string;
  description: string;
  published?: PublishedScheduler;
  order: number;
  gateway: Record<string, unknown>;
  engineArgs: string;
  endpoint: Record<string, unknown>;
  /** Where it came from: a file's path, or "derived: scorer X" / "derived: picker X". */
  source: string;
}

const NAME = /^[a-z][a-z0-9-]{0,63}$/;

/** Every policy file in `dir`, validated (a gateway fragment the gateway would refuse is refused here, with its key path). */
export function readPolicyFiles(dir: string): RoutingPolicy[] {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith(".yaml") || f.endsWith(".yml"));
  } catch (err) {
    throw new UsageError(`routing policies: cannot read ${dir}: ${err instanceof Error ? err.message : String(err)}`);
  }
  return files.sort().map((f) => readPolicyFile(join(dir, f)));
}

export function readPolicyFile(path: string): RoutingPolicy {
  const name = basename(path).replace(/\.ya?ml$/, "");
  if (!NAME.test(name)) throw new UsageError(`${path}: a policy's file name is its name: lowercase letters, digits and '-', starting with a letter`);
  let raw: unknown;
  try {
    raw = parseYaml(readInputFile(path, MAX_CONFIG_FILE_BYTES, "routing policy"));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const parsed = policyFile.safeParse(raw);
  if (!parsed.success) {
    const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(root)"}: ${i.message}`);
    throw new UsageError(`${path}: ${issues.join("; ")}`);
  }
  const p = parsed.data;
  for (const key of ["listen", "admin_listen", "endpoints"]) {
    if (key in p.gateway) throw new UsageError(`${path}: gateway.${key} is the bench's to set`);
  }
  checkGatewayFragment(path, p.gateway);
  return {
    name,
    description: p.description,
    ...(p.published ? { published: p.published } : {}),
    order: p.order ?? DEFAULT_ORDER,
    gateway: p.gateway,
    engineArgs: p.engine_args,
    endpoint: p.endpoint,
    source: path,
  };
}

/** The gateway's own validation, on the fragment over one placeholder endpoint: a bad key fails before any engine starts. */
function checkGatewayFragment(path: string, gateway: Record<string, unknown>): void {
  try {
    buildConfig({ ...gateway, endpoints: [{ id: "check", url: "http://127.0.0.1:1", models: ["m"] }] }, {}, path);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`${path}: the gateway would refuse it: ${err.issues.join("; ")}`);
    throw err;
  }
}

/** Scorer and picker names a policy's scheduling uses (the config's defaults where it sets none). */
function pluginsOf(p: RoutingPolicy): { scorers: string[]; picker: string } {
  const s = schedulingSchema.parse(p.gateway.scheduling ?? {});
  return { scorers: s.scorers.map((x) => x.name), picker: s.picker };
}

/**
 * Policies for the scorers and pickers no file uses: llmgw's default profile
 * with the scorer in place of its prefix-affinity scorer (at that weight),
 * or the picker in place of max-score.
 */
export function derivedPolicies(files: readonly RoutingPolicy[]): RoutingPolicy[] {
  const usedScorers = new Set<string>();
  const usedPickers = new Set<string>();
  for (const p of files) {
    const { scorers, picker } = pluginsOf(p);
    for (const s of scorers) usedScorers.add(s);
    usedPickers.add(picker);
  }
  const defaults = schedulingSchema.parse({});
  const prefixWeight = defaults.scorers.find((s) => s.name === DEFAULT_PREFIX_SCORER)?.weight ?? DERIVED_SCORER_WEIGHT;
  const out: RoutingPolicy[] = [];
  for (const scorer of SCORER_NAMES) {
    if (usedScorers.has(scorer)) continue;
    const scorers = [...defaults.scorers.filter((s) => s.name !== DEFAULT_PREFIX_SCORER && s.name !== scorer), { name: scorer, weight: prefixWeight }];
    out.push({
      name: scorer,
      description: `llmgw's default profile with ${scorer} (weight ${prefixWeight}) in place of ${DEFAULT_PREFIX_SCORER}`,
      order: DEFAULT_ORDER,
      gateway: { scheduling: { scorers } },
      engineArgs: "",
      endpoint: {},
      source: `derived: scorer ${scorer}`,
    });
  }
  for (const picker of PICKER_NAMES) {
    if (usedPickers.has(picker)) continue;
    out.push({
      name: picker,
      description: `llmgw's default scorers with the ${picker} picker`,
      order: DEFAULT_ORDER,
      gateway: { scheduling: { picker } },
      engineArgs: "",
      endpoint: {},
      source: `derived: picker ${picker}`,
    });
  }
  return out;
}

/** The files' policies and the derived ones (a file wins a name), in table order. */
export function routingPolicies(dir = POLICY_DIR): RoutingPolicy[] {
  const files = readPolicyFiles(dir);
  const names = new Set(files.map((p) => p.name));
  const all = [...files, ...derivedPolicies(files).filter((p) => !names.has(p.name))];
  return all.sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
}

/** The policies named in `wanted` (in its order), or all; an unknown name is a usage error listing the known ones. */
export function selectPolicies(all: readonly RoutingPolicy[], wanted: readonly string[]): RoutingPolicy[] {
  if (wanted.length === 0) return [...all];
  return wanted.map((name) => {
    const p = all.find((x) => x.name === name);
    if (!p) throw new UsageError(`--policies: unknown policy '${name}' (known: ${all.map((x) => x.name).join(", ")})`);
    return p;
  });
}

/**
 * An endpoint entry's extra keys for one engine: every "{engine.NAME}" in a
 * string value becomes the engine's listener URL named NAME (its "listening"
 * log line), so a policy can point the gateway at, say, an engine's
 * KV-events socket. A name the engine never announced is an error.
 */
export function endpointExtras(template: Record<string, unknown>, urls: Readonly<Record<string, string>>): Record<string, unknown> {
  const fill = (v: unknown): unknown => {
    if (typeof v === "string") {
      return v.replace(/\{engine\.([a-z0-9_-]+)\}/gi, (_, name: string) => {
        const url = urls[name];
        if (url === undefined)
          throw new UsageError(
            `a routing policy's endpoint template names {engine.${name}}, which the engine did not announce (it has: ${Object.keys(urls).join(", ") || "none"})`,
          );
        return url;
      });
    }
    if (Array.isArray(v)) return v.map(fill);
    if (v !== null && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]));
    return v;
  };
  return fill(template) as Record<string, unknown>;
}

/** Listener names a template refers to (the bench waits for the engines to announce them). */
export function templateListeners(template: Record<string, unknown>): string[] {
  const names = new Set<string>();
  for (const m of JSON.stringify(template).matchAll(/\{engine\.([a-z0-9_-]+)\}/gi)) names.add(m[1]!);
  return [...names];
}
