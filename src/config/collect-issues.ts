/** Every schema error of a config document in one pass, each naming its key path, and the part of the document the cross-field checks may still read. */
import type { z } from "zod";
import { knownKeysAt, nearestKey } from "./key-suggestions.ts";

/** A config nests six levels or so; past this it is not a config, and cloning or walking it could overflow the stack. */
const MAX_NESTING_DEPTH = 64;
/** Unknown keys listed per object; a pasted blob of thousands would bury the errors that matter. */
const MAX_UNKNOWN_KEYS_LISTED = 20;
/** Issues listed in one error, and characters per issue: enough for any real config, bounded for a hostile one. */
const MAX_ISSUES_LISTED = 50;
const MAX_ISSUE_CHARS = 300;
/** Each repair pass removes at least one key; a document needs about as many passes as it nests. */
const MAX_REPAIR_PASSES = 8;
const SEGMENT_SHOWN_CHARS = 40;

type Path = readonly PropertyKey[];

/** A key as the operator can read it: plain names as they are, anything else quoted with control and non-ASCII characters escaped. */
function segmentText(key: string): string {
  if (/^[A-Za-z0-9_-]+$/.test(key) && key.length <= SEGMENT_SHOWN_CHARS) return key;
  const cut = key.length > SEGMENT_SHOWN_CHARS;
  const quoted = JSON.stringify(cut ? key.slice(0, SEGMENT_SHOWN_CHARS) : key).replace(
    /[^\x20-\x7e]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
  return `[${cut ? `${quoted.slice(0, -1)}…"` : quoted}]`;
}

/** `endpoints[2].url` from zod's path array. */
function formatPath(path: Path): string {
  let out = "";
  for (const p of path) {
    if (typeof p === "number") out += `[${p}]`;
    else {
      const text = segmentText(String(p));
      out += out === "" || text.startsWith("[") ? text : `.${text}`;
    }
  }
  return out === "" ? "(root)" : out;
}

/** One line per unknown key, naming its full path and the known key nearest it at that level. */
function unknownKeyIssues(schema: z.core.$ZodType, path: Path, keys: readonly string[]): string[] {
  const known = knownKeysAt(schema, path);
  const out = keys.slice(0, MAX_UNKNOWN_KEYS_LISTED).map((key) => {
    const near = nearestKey(key, known);
    return `${formatPath([...path, key])}: unknown key${near === undefined ? "" : ` (did you mean '${near}'?)`}`;
  });
  if (keys.length > MAX_UNKNOWN_KEYS_LISTED) out.push(`${formatPath(path)}: and ${keys.length - MAX_UNKNOWN_KEYS_LISTED} more unknown key(s)`);
  return out;
}

function formatIssues(schema: z.core.$ZodType, issues: readonly z.core.$ZodIssue[]): string[] {
  return issues.flatMap((i) => (i.code === "unrecognized_keys" ? unknownKeyIssues(schema, i.path, i.keys) : [`${formatPath(i.path)}: ${i.message}`]));
}

/** The first place `doc` nests deeper than a config can, walked without recursion so the walk itself cannot overflow. */
export function nestingIssue(doc: unknown): string | undefined {
  const stack: { value: unknown; path: PropertyKey[] }[] = [{ value: doc, path: [] }];
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    if (typeof value !== "object" || value === null) continue;
    if (path.length >= MAX_NESTING_DEPTH) return `${formatPath(path.slice(0, 8))}…: nested deeper than ${MAX_NESTING_DEPTH} levels`;
    const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
    for (const [k, v] of entries) stack.push({ value: v, path: [...path, k] });
  }
  return undefined;
}

const within = (path: Path, prefix: Path) => prefix.length <= path.length && prefix.every((p, i) => path[i] === p);

/** Array elements cannot be removed without renumbering the rest (and every path after them): remove the array's key instead. */
function keyTarget(path: Path): Path {
  let end = path.length;
  while (end > 0 && typeof path[end - 1] === "number") end--;
  return path.slice(0, end);
}

function deleteAt(doc: Record<string, unknown>, path: Path): boolean {
  let node: unknown = doc;
  for (const p of path.slice(0, -1)) {
    if (typeof node !== "object" || node === null) return false;
    node = (node as Record<PropertyKey, unknown>)[p];
  }
  const key = path[path.length - 1];
  if (key === undefined || typeof node !== "object" || node === null || Array.isArray(node) || !Object.hasOwn(node, key)) return false;
  delete (node as Record<PropertyKey, unknown>)[key];
  return true;
}

interface CollectedIssues<T> {
  /** The document parsed with every failing key removed (so its default applies); undefined when no such document parses. */
  data: T | undefined;
  /** Every schema error, in document order as zod reports it, each `path: message`. */
  issues: string[];
  /** Paths whose value failed and was removed: `data` holds a default there, not what the operator wrote. */
  failed: string[];
}

/**
 * Parse `doc`, and when it fails, remove what failed and parse again, so that
 * cross-field checks can run over the rest in the same report. A removed key
 * that is required fails anew at the same path: its parent goes next. Errors
 * a later pass finds elsewhere (an object's refinement runs only once its
 * fields parse) are reported too.
 */
export function parseCollecting<T>(schema: z.ZodType<T>, doc: Record<string, unknown>): CollectedIssues<T> {
  const first = schema.safeParse(doc);
  if (first.success) return { data: first.data, issues: [], failed: [] };
  const issues = new Set(formatIssues(schema, first.error.issues));
  const work = structuredClone(doc);
  const removed: Path[] = [];
  let pending = first.error.issues;
  for (let pass = 0; pass < MAX_REPAIR_PASSES; pass++) {
    let progress = false;
    for (const issue of pending) {
      if (issue.code === "unrecognized_keys") {
        for (const key of issue.keys) progress = deleteAt(work, [...issue.path, key]) || progress;
        continue;
      }
      const cause = removed.find((r) => within(issue.path, r));
      const target = keyTarget(cause === undefined ? issue.path : cause.slice(0, -1));
      if (target.length === 0) return { data: undefined, issues: [...issues], failed: removed.map(formatPath) };
      if (deleteAt(work, target)) {
        removed.push(target);
        progress = true;
      }
    }
    const again = schema.safeParse(work);
    if (again.success) return { data: again.data, issues: [...issues], failed: removed.map(formatPath) };
    for (const line of formatIssues(
      schema,
      // Not reported again: what fails inside a removed key, and an object's own rule (a refinement) that fails because one of its keys was removed.
      again.error.issues.filter((i) => !removed.some((r) => within(i.path, r) || (i.code === "custom" && within(r, i.path)))),
    ))
      issues.add(line);
    pending = again.error.issues;
    if (!progress) break;
  }
  return { data: undefined, issues: [...issues], failed: removed.map(formatPath) };
}

/** At most MAX_ISSUES_LISTED issues of at most MAX_ISSUE_CHARS each, then how many more. */
export function boundIssues(issues: readonly string[]): string[] {
  const out = issues.slice(0, MAX_ISSUES_LISTED).map((i) => (i.length > MAX_ISSUE_CHARS ? `${i.slice(0, MAX_ISSUE_CHARS)}…` : i));
  if (issues.length > MAX_ISSUES_LISTED) out.push(`… and ${issues.length - MAX_ISSUES_LISTED} more issue(s)`);
  return out;
}

/** Whether a check reading `reads` would see a default where the operator's value failed (a path at, above or below one of them). */
export function readsFailed(reads: readonly string[], failed: readonly string[]): boolean {
  const related = (a: string, b: string) => a === b || a.startsWith(`${b}.`) || a.startsWith(`${b}[`);
  return reads.some((r) => failed.some((f) => related(f, r) || related(r, f)));
}
