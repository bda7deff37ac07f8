/**
 * Every relative link in README.md and docs/*.md leads somewhere: the file
 * (or folder) exists, and a #anchor names a heading of the page it points to.
 * External links (http, https, mailto) are not fetched. The README, the map,
 * links every page of the manual.
 */
import { describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import { headingAnchors, manualPages, proseLines, ROOT, readPage } from "../helpers/docs.ts";

interface Link {
  page: string;
  line: number;
  target: string;
}

/** Inline links and images, `[text](target)`, outside code blocks and code spans. */
function linksOf(page: string): Link[] {
  const links: Link[] = [];
  proseLines(readPage(page)).forEach((raw, i) => {
    const line = raw.replace(/`[^`]*`/g, "``");
    for (const m of line.matchAll(/!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      links.push({ page, line: i + 1, target: m[1]! });
    }
  });
  return links;
}

/** Why the link does not resolve, or null when it does. */
function brokenBecause(link: Link): string | null {
  const { page, target } = link;
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null;
  const hash = target.indexOf("#");
  const path = hash === -1 ? target : target.slice(0, hash);
  const anchor = hash === -1 ? null : decodeURIComponent(target.slice(hash + 1));
  const file = path === "" ? page : normalize(join(dirname(page), decodeURIComponent(path)));
  if (file.startsWith("..")) return `points outside the repository (${file})`;
  if (!existsSync(join(ROOT, file))) return `${file} does not exist`;
  if (anchor === null) return null;
  if (!file.endsWith(".md")) return `an anchor into ${file}, which is not a Markdown page`;
  if (!headingAnchors(readPage(relative(ROOT, join(ROOT, file)))).has(anchor)) return `${file} has no heading #${anchor}`;
  return null;
}

describe("the manual's links", () => {
  test("the anchors are GitHub's", () => {
    const anchors = headingAnchors("# The dashboard (`/dashboard`)\n## Kubernetes (`deploy/k8s/`)\n## Limits\n## Limits\n```\n# not a heading\n```\n");
    expect([...anchors]).toEqual(["the-dashboard-dashboard", "kubernetes-deployk8s", "limits", "limits-1"]);
  });

  test("a broken link is found", () => {
    expect(brokenBecause({ page: "README.md", line: 1, target: "docs/no-such-page.md" })).toContain("does not exist");
    expect(brokenBecause({ page: "README.md", line: 1, target: "docs/architecture.md#no-such-heading" })).toContain("no heading");
    expect(brokenBecause({ page: "docs/architecture.md", line: 1, target: "#layout" })).toBeNull();
  });

  test("the README links every page of docs/", () => {
    const linked = new Set(linksOf("README.md").map((l) => l.target.split("#")[0]));
    const unlinked = manualPages().filter((page) => page !== "README.md" && !linked.has(page));
    expect(unlinked).toEqual([]);
  });

  for (const page of manualPages()) {
    test(`${page}: every relative link and anchor resolves`, () => {
      const broken = linksOf(page)
        .map((link) => ({ link, why: brokenBecause(link) }))
        .filter((x) => x.why !== null)
        .map(({ link, why }) => `${link.page}:${link.line}: (${link.target}) ${why}`);
      expect(broken).toEqual([]);
    });
  }
});
