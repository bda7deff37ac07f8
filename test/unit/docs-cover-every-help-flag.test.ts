/**
 * Every long flag a command's --help prints is documented on that command's
 * page, and where the page has a section named after the invocation
 * (`## \`llmgw bench admission\``, `### \`llmgw demo\``), in that section: so a
 * flag two commands share (`--listen`, `--engines`) is documented for each.
 * The commands, their sub-commands and bench's scenarios are read from the
 * CLI's own help (`bin/llmgw --help`, `bench --help`, the usage lines), so a
 * new command, scenario or flag is covered without touching this test.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { manualPages, pageExists, proseLines, ROOT, readPage } from "../helpers/docs.ts";

/** Where each command is documented. */
const PAGES: Record<string, string[]> = {
  serve: ["docs/gateway.md"],
  demo: ["docs/gateway.md"],
  "sim-engine": ["docs/sim-engine.md", "README.md"],
  agent: ["docs/agent.md"],
  ctl: ["docs/fleet.md"],
  bench: ["docs/benchmarks.md"],
};

function help(args: string[]): string {
  const r = Bun.spawnSync([join(ROOT, "bin", "llmgw"), ...args, "--help"], { cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  const out = r.stdout.toString();
  if (r.exitCode !== 0) throw new Error(`llmgw ${args.join(" ")} --help exited ${r.exitCode}: ${r.stderr.toString()}`);
  return out;
}

/** The names listed under a "<heading>:" section of a help text, up to the next blank line. */
function listed(text: string, heading: string): string[] {
  const lines = text.split("\n");
  const start = lines.indexOf(`${heading}:`);
  if (start === -1) return [];
  const names: string[] = [];
  for (const line of lines.slice(start + 1)) {
    const m = /^ {2}([a-z][a-z0-9-]*)\s/.exec(line);
    if (!m) break;
    names.push(m[1]!);
  }
  return names;
}

/** Sub-commands named in usage lines: `llmgw agent inventory […]`. */
function subCommands(command: string, text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(new RegExp(`llmgw ${command} ([a-z][a-z0-9-]*)\\b`, "g"))) found.add(m[1]!);
  return [...found];
}

function longFlags(text: string): string[] {
  return [...new Set([...text.matchAll(/(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?![\w-])/g)].map((m) => `--${m[1]}`))].filter((f) => f !== "--help");
}

/** Whether `flag` appears on the page as itself (not as the start of a longer flag). */
function documents(text: string, flag: string): boolean {
  return new RegExp(`(?<![\\w-])${flag}(?![\\w-])`).test(text);
}

/**
 * The part of a page that documents `invocation`: the sections (level 2 and
 * below) whose heading names it, with their subsections; the whole page when
 * no heading does, except the README, a map of every command, which counts
 * only through such a section.
 */
function documentation(page: string, invocation: string): string {
  const lines = readPage(page).split("\n");
  const prose = proseLines(lines.join("\n"));
  const names = new RegExp(`(?<![\\w-])${invocation.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?![\\w-])`);
  const kept: string[] = [];
  let level = 0; // inside a matching section of this level; 0: outside
  let matched = false;
  prose.forEach((line, i) => {
    const h = /^(#{2,6})\s+(.*)$/.exec(line);
    if (h) {
      const depth = h[1]!.length;
      if (level !== 0 && depth <= level) level = 0;
      if (level === 0 && names.test(h[2]!)) {
        level = depth;
        matched = true;
      }
    }
    if (level !== 0) kept.push(lines[i]!);
  });
  if (matched) return kept.join("\n");
  return page === "README.md" ? "" : lines.join("\n");
}

interface HelpPage {
  /** "serve", "agent inventory", "bench overhead" … */
  invocation: string;
  command: string;
  text: string;
}

function everyHelp(): HelpPage[] {
  const pages: HelpPage[] = [];
  for (const command of listed(help([]), "commands")) {
    const text = help([command]);
    pages.push({ invocation: command, command, text });
    for (const sub of subCommands(command, text)) pages.push({ invocation: `${command} ${sub}`, command, text: help([command, sub]) });
    for (const scenario of listed(text, "scenarios")) pages.push({ invocation: `${command} ${scenario}`, command, text: help([command, scenario]) });
  }
  return pages;
}

describe("every --help flag is documented", () => {
  const helps = everyHelp();

  test("the CLI's commands and bench scenarios are all read", () => {
    const invocations = helps.map((h) => h.invocation);
    for (const expected of ["serve", "demo", "sim-engine", "agent", "agent inventory", "ctl", "bench", "bench overhead", "bench cluster"]) {
      expect(invocations).toContain(expected);
    }
    for (const h of helps) expect(PAGES[h.command]).toBeDefined();
  });

  test("an undocumented flag is caught", () => {
    expect(longFlags("  --metrics-listen HOST:PORT  x\n  --log-level L\n see --help")).toEqual(["--metrics-listen", "--log-level"]);
    expect(documents("use `--listen-all`", "--listen")).toBe(false);
    expect(documents("| `--listen HOST:PORT` |", "--listen")).toBe(true);
    expect(documents(manualPages().map(readPage).join("\n"), "--no-such-flag-anywhere")).toBe(false);
  });

  test("a flag is looked for in the invocation's own section", () => {
    const admission = documentation("docs/benchmarks.md", "bench admission");
    expect(admission).not.toBe(readPage("docs/benchmarks.md"));
    expect(documents(admission, "--bronze")).toBe(true);
    expect(documents(admission, "--kill-every-ms")).toBe(false);
  });

  for (const h of helps) {
    test(`llmgw ${h.invocation} --help: each flag is documented on ${PAGES[h.command]?.join(" or ")}`, () => {
      const docs = (PAGES[h.command] ?? []).filter(pageExists).map((page) => documentation(page, h.invocation));
      expect(docs.length).toBeGreaterThan(0);
      const undocumented = longFlags(h.text).filter((flag) => !docs.some((text) => documents(text, flag)));
      expect(undocumented).toEqual([]);
    });
  }
});
