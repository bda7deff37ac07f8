/** "Did you mean": the known key nearest a misspelt one, from the zod schema at the same level of the document. */
import type { z } from "zod";

/** Keys longer than this get no suggestion: the distance costs length², and a key that long was not a typo. */
const MAX_SUGGESTED_KEY_CHARS = 64;

/**
 * Optimal string alignment distance (Damerau-Levenshtein with adjacent
 * transpositions, each substring edited once): `helth`→`health` is 1,
 * `max_body_btyes`→`max_body_bytes` is 1.
 */
function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[] = new Array(rows * cols).fill(0);
  for (let i = 0; i < rows; i++) d[i * cols] = i;
  for (let j = 0; j < cols; j++) d[j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let v = Math.min(d[(i - 1) * cols + j]! + 1, d[i * cols + j - 1]! + 1, d[(i - 1) * cols + j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) v = Math.min(v, d[(i - 2) * cols + j - 2]! + 1);
      d[i * cols + j] = v;
    }
  }
  return d[rows * cols - 1]!;
}

/** How far a typed key may be from a known one and still be a typo of it: none for one or two characters, up to three edits for long keys. */
function allowedDistance(length: number): number {
  return length <= 2 ? 0 : length <= 4 ? 1 : length <= 9 ? 2 : 3;
}

/** Case and `-` for `_` are not typos worth counting: `Max-Body-Bytes` is `max_body_bytes`. */
function normalise(key: string): string {
  return key.toLowerCase().replaceAll("-", "_");
}

/** The known key nearest `key` within the allowed distance (ties: alphabetical), or undefined when none is close. */
export function nearestKey(key: string, known: readonly string[]): string | undefined {
  if (key.length === 0 || key.length > MAX_SUGGESTED_KEY_CHARS) return undefined;
  const k = normalise(key);
  let best: { key: string; distance: number } | undefined;
  for (const candidate of [...known].sort()) {
    const distance = editDistance(k, normalise(candidate));
    if (distance > allowedDistance(k.length)) continue;
    if (best === undefined || distance < best.distance) best = { key: candidate, distance };
  }
  return best?.key;
}

type Schema = z.core.$ZodType;

/** The schema a wrapper (optional, default, pipe …) stands for; undefined for a schema that wraps nothing. */
function unwrapOnce(s: Schema): Schema | undefined {
  const def = s._zod.def as unknown as Record<string, unknown>;
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "prefault":
    case "catch":
    case "readonly":
    case "nonoptional":
      return def.innerType as Schema;
    case "pipe":
      return def.in as Schema;
    case "lazy":
      return (def.getter as () => Schema)();
    default:
      return undefined;
  }
}

/** The schemas `s` may be once wrappers are gone (a union is each of its options). */
function shapes(s: Schema, depth = 0): Schema[] {
  if (depth > 16) return [];
  const def = s._zod.def as unknown as Record<string, unknown>;
  if (def.type === "union") return (def.options as Schema[]).flatMap((o) => shapes(o, depth + 1));
  const inner = unwrapOnce(s);
  return inner === undefined ? [s] : shapes(inner, depth + 1);
}

/** The child schemas at one path segment (an object's key, an array's element, a record's value). */
function childAt(s: Schema, segment: PropertyKey): Schema[] {
  return shapes(s).flatMap((shape) => {
    const def = shape._zod.def as unknown as Record<string, unknown>;
    if (def.type === "object" && typeof segment === "string") {
      const child = (def.shape as Record<string, Schema>)[segment];
      return child === undefined ? [] : [child];
    }
    if (def.type === "array" && typeof segment === "number") return [def.element as Schema];
    if (def.type === "record") return [def.valueType as Schema];
    return [];
  });
}

/** Every key the schema knows for the object at `path` (the object an unknown-key issue names). */
export function knownKeysAt(root: Schema, path: readonly PropertyKey[]): string[] {
  let level: Schema[] = [root];
  for (const segment of path) level = level.flatMap((s) => childAt(s, segment));
  const keys = new Set<string>();
  for (const s of level.flatMap((l) => shapes(l))) {
    const def = s._zod.def as unknown as Record<string, unknown>;
    if (def.type === "object") for (const k of Object.keys(def.shape as object)) keys.add(k);
  }
  return [...keys];
}
