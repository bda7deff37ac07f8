/**
 * The layout's one rule, checked on the real module graph: no import cycles
 * in src/ or workers/ (type-only imports included), every import points down
 * the layers docs/architecture.md lists (read from that page, so the page and
 * the code cannot drift apart), and the data plane's floors hold.
 * Module specifiers are resolved by the TypeScript compiler itself.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dir, "..", "..");

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.ts$/.test(name) && !name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

/** file → the project files it imports (import, export … from, import(), import type). */
function moduleGraph(): Map<string, string[]> {
  const options: ts.CompilerOptions = { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, allowImportingTsExtensions: true };
  const graph = new Map<string, string[]>();
  for (const file of [...sourceFiles("src"), ...sourceFiles("workers")]) {
    const info = ts.preProcessFile(readFileSync(join(ROOT, file), "utf8"), true, true);
    const deps: string[] = [];
    for (const imported of info.importedFiles) {
      const resolved = ts.resolveModuleName(imported.fileName, join(ROOT, file), options, ts.sys).resolvedModule;
      if (resolved && !resolved.isExternalLibraryImport && resolved.resolvedFileName.startsWith(ROOT)) deps.push(relative(ROOT, resolved.resolvedFileName));
    }
    graph.set(file, deps);
  }
  return graph;
}

/** Strongly connected components with more than one file, or a file importing itself (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** The layer table of docs/architecture.md: folder (or "cli.ts") → layer. */
function layers(): Map<string, number> {
  const page = readFileSync(join(ROOT, "docs", "architecture.md"), "utf8");
  const section = page.slice(page.indexOf("## Dependencies point down"));
  const out = new Map<string, number>();
  for (const m of section.matchAll(/^\| (\d+) \| ([^|]+) \|$/gm)) for (const name of m[2]!.split(",")) out.set(name.trim(), Number(m[1]));
  return out;
}

/** The folder a file belongs to for layering: src/<folder>/…, src/cli.ts, workers. */
function unitOf(file: string): string {
  const parts = file.split("/");
  return parts[0] === "workers" ? "workers" : parts[1]!;
}

const graph = moduleGraph();

describe("the import graph", () => {
  test("is read from every source file", () => {
    expect(graph.size).toBeGreaterThan(200);
    expect(graph.get("src/cli.ts")!.length).toBeGreaterThan(0);
  });

  test("has no cycles, type-only imports included", () => {
    expect(cycles(graph)).toEqual([]);
  });

  test("points down the layers docs/architecture.md lists", () => {
    const layer = layers();
    expect(layer.get("shared")).toBe(0);
    const unplaced = new Set<string>();
    const upward: string[] = [];
    for (const [file, deps] of graph) {
      const from = unitOf(file);
      if (!layer.has(from)) unplaced.add(from);
      for (const dep of deps) {
        const to = unitOf(dep);
        if (to === from || !layer.has(to)) continue;
        if (layer.get(to)! >= layer.get(from)!) upward.push(`${file} → ${dep} (layer ${layer.get(from)} → ${layer.get(to)})`);
      }
    }
    expect([...unplaced]).toEqual([]);
    expect(upward).toEqual([]);
  });

  test("the data plane's floors: services and request/ below gates/ and proxy/, continuation/ on proxy's contracts, only server.ts on the pipeline", () => {
    const floorOf = (file: string): string | undefined => {
      if (!file.startsWith("src/gateway/")) return undefined;
      const rest = file.slice("src/gateway/".length);
      return rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : rest === "server.ts" ? "server" : "services";
    };
    const forbidden: Record<string, ReadonlySet<string>> = {
      services: new Set(["request", "gates", "proxy", "continuation", "pipeline", "server"]),
      request: new Set(["gates", "proxy", "continuation", "pipeline", "server"]),
      gates: new Set(["proxy", "continuation", "pipeline", "server"]),
      proxy: new Set(["gates", "continuation", "pipeline", "server"]),
      continuation: new Set(["gates", "pipeline", "server"]),
      pipeline: new Set(["server"]),
    };
    const continuationMayUse = new Set(["src/gateway/proxy/relay-contracts.ts", "src/gateway/proxy/sse-scanner.ts"]);
    const wrong: string[] = [];
    for (const [file, deps] of graph) {
      const from = floorOf(file);
      if (from === undefined) continue;
      for (const dep of deps) {
        const to = floorOf(dep);
        if (to === undefined || to === from) continue;
        if (forbidden[from]?.has(to) || (from === "continuation" && to === "proxy" && !continuationMayUse.has(dep))) wrong.push(`${file} → ${dep}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  test("the checker itself finds a cycle, and files land in their folder's layer", () => {
    const g = new Map([
      ["src/a/x.ts", ["src/b/y.ts"]],
      ["src/b/y.ts", ["src/a/x.ts"]],
      ["src/c/z.ts", []],
    ]);
    expect(cycles(g)).toEqual([["src/a/x.ts", "src/b/y.ts"]]);
    expect(unitOf("src/cli.ts")).toBe("cli.ts");
    expect(unitOf("workers/health.ts")).toBe("workers");
    expect(unitOf("src/gateway/proxy/relay.ts")).toBe("gateway");
  });
});
