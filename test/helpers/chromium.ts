/** Debian's Chromium through playwright-core, as the in-browser e2e tests drive it: headless, a fresh profile, a page whose errors are collected. */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";

export const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

/** What went wrong on `page` from now on: page errors, and console errors unless `console` is false. */
export function pageProblems(page: Page, opts: { console?: boolean } = {}): string[] {
  const problems: string[] = [];
  if (opts.console !== false)
    page.on("console", (m) => {
      if (m.type() === "error") problems.push(`console: ${m.text()}`);
    });
  page.on("pageerror", (err) => problems.push(`page error: ${err.message}`));
  return problems;
}

/** A headless Chromium with a fresh profile under the system's temp dir (`profilePrefix`), and its first page. */
export async function openChromium(
  executablePath: string,
  opts: { profilePrefix: string; viewport: { width: number; height: number }; console?: boolean },
): Promise<{ browser: BrowserContext; page: Page; problems: string[] }> {
  const browser = await chromium.launchPersistentContext(mkdtempSync(join(tmpdir(), opts.profilePrefix)), {
    executablePath,
    headless: true,
    args: CHROMIUM_FLAGS,
    viewport: opts.viewport,
  });
  const page = browser.pages()[0] ?? (await browser.newPage());
  return { browser, page, problems: pageProblems(page, { console: opts.console ?? true }) };
}
