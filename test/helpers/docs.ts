/**
 * The manual as the docs tests read it: README.md and every docs/*.md page,
 * their text with fenced code blocks set apart, and GitHub's heading anchors.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const ROOT = join(import.meta.dir, "..", "..");

/** README.md and docs/*.md, as paths relative to the repository root. */
export function manualPages(): string[] {
  const docs = readdirSync(join(ROOT, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`);
  return ["README.md", ...docs];
}

export function readPage(page: string): string {
  return readFileSync(join(ROOT, page), "utf8");
}

export function pageExists(page: string): boolean {
  return existsSync(join(ROOT, page));
}

/** The page's lines, those inside fenced code blocks (``` or ~~~) and the fences blanked, so indexes stay line numbers. */
export function proseLines(text: string): string[] {
  const out: string[] = [];
  let fence: string | null = null;
  for (const line of text.split("\n")) {
    const m = /^\s*(```|~~~)/.exec(line);
    if (m) {
      if (fence === null) fence = m[1]!;
      else if (fence === m[1]) fence = null;
      out.push("");
      continue;
    }
    out.push(fence === null ? line : "");
  }
  return out;
}

/**
 * GitHub's anchor for a heading (github-slugger): lower case, markup and
 * punctuation dropped, spaces turned into hyphens; a repeated heading gets
 * -1, -2 … in page order.
 */
export function headingAnchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  for (const line of proseLines(text)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = m[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\p{Pc} -]/gu, "")
      .replace(/ /g, "-");
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}
