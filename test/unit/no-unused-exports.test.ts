/**
 * Every export of src/ and workers/ has an importer somewhere in the project
 * (src/, workers/, test/, bin/): an export nothing imports is dead code or a
 * door nobody uses, and both mislead a reader about what a module offers.
 * Read from the syntax alone (no type program), with module specifiers
 * resolved by the TypeScript compiler.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import ts from "typescript";

const ROOT = join(import.meta.dir, "..", "..");
const OPTIONS: ts.CompilerOptions = { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, allowImportingTsExtensions: true };

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(ROOT, dir))) {
    const rel = join(dir, name);
    if (statSync(join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.(ts|mjs)$/.test(name) && !name.endsWith(".d.ts")) out.push(rel);
  }
  return out;
}

const resolved = new Map<string, string | undefined>();
function resolve(specifier: string, from: string): string | undefined {
  if (specifier.startsWith(".") && specifier.endsWith(".ts")) return join(dirname(from), specifier);
  const key = `${dirname(from)}\0${specifier}`;
  if (!resolved.has(key)) resolved.set(key, resolveWithCompiler(specifier, from));
  return resolved.get(key);
}

function resolveWithCompiler(specifier: string, from: string): string | undefined {
  const r = ts.resolveModuleName(specifier, join(ROOT, from), OPTIONS, ts.sys).resolvedModule;
  if (!r || r.isExternalLibraryImport || !r.resolvedFileName.startsWith(ROOT)) return undefined;
  return relative(ROOT, r.resolvedFileName);
}

function leftmost(name: ts.EntityName): string {
  return ts.isIdentifier(name) ? name.text : leftmost(name.left);
}

function hasExportModifier(node: ts.Node): boolean {
  return ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);
}

/** "file#name" for each export declared in src/ or workers/ that no file imports. */
function unusedExports(extra = new Map<string, string>()): string[] {
  const files = [...sourceFiles("src"), ...sourceFiles("workers"), ...sourceFiles("test"), ...sourceFiles("bin")];
  const exported = new Map<string, Set<string>>(); // file → names it declares as exports
  const used = new Set<string>(); // "file#name"
  const wholeModule = new Set<string>(); // files imported as a namespace or by import()
  const starFrom = new Map<string, string[]>(); // file → files it re-exports with `export *`
  for (const file of files) {
    const text = readFileSync(join(ROOT, file), "utf8") + (extra.get(file) ?? "");
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, false);
    const names = new Set<string>();
    exported.set(file, names);
    const topLevel = new Set<ts.Node>(source.statements);
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
        const target = resolve(node.moduleSpecifier.text, file);
        const clause = node.importClause;
        if (target && clause) {
          if (clause.name) used.add(`${target}#default`);
          const bindings = clause.namedBindings;
          if (bindings && ts.isNamespaceImport(bindings)) wholeModule.add(target);
          else if (bindings) for (const e of bindings.elements) used.add(`${target}#${(e.propertyName ?? e.name).text}`);
        }
      } else if (ts.isExportDeclaration(node)) {
        const target = node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier) ? resolve(node.moduleSpecifier.text, file) : undefined;
        if (node.exportClause && ts.isNamedExports(node.exportClause)) {
          for (const e of node.exportClause.elements) {
            if (target) used.add(`${target}#${(e.propertyName ?? e.name).text}`);
            names.add(e.name.text);
          }
        } else if (target) starFrom.set(file, [...(starFrom.get(file) ?? []), target]);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const arg = node.arguments[0];
        const target = arg && ts.isStringLiteralLike(arg) ? resolve(arg.text, file) : undefined;
        if (target) wholeModule.add(target);
      } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
        const target = resolve(node.argument.literal.text, file);
        if (target && node.qualifier) used.add(`${target}#${ts.isIdentifier(node.qualifier) ? node.qualifier.text : leftmost(node.qualifier)}`);
        else if (target) wholeModule.add(target);
      } else if (topLevel.has(node) && hasExportModifier(node)) {
        if (ts.isVariableStatement(node)) {
          for (const d of node.declarationList.declarations) if (ts.isIdentifier(d.name)) names.add(d.name.text);
        } else if (
          (ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.DefaultKeyword)) ||
          ts.isExportAssignment(node)
        ) {
          names.add("default");
        } else {
          const name = (node as ts.DeclarationStatement).name;
          if (name && ts.isIdentifier(name)) names.add(name.text);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  // A module re-exported whole, or imported whole, lends its use to every name it exports.
  const usedNames = (file: string, seen = new Set<string>()): Set<string> => {
    if (seen.has(file)) return new Set();
    seen.add(file);
    const out = new Set<string>();
    for (const key of used) if (key.startsWith(`${file}#`)) out.add(key.slice(file.length + 1));
    for (const [from, targets] of starFrom) if (targets.includes(file)) for (const n of usedNames(from, seen)) out.add(n);
    return out;
  };
  const unused: string[] = [];
  for (const [file, names] of exported) {
    if (!/^(src|workers)\//.test(file) || wholeModule.has(file)) continue;
    if ([...starFrom].some(([from, targets]) => targets.includes(file) && wholeModule.has(from))) continue;
    const usedHere = usedNames(file);
    for (const name of names) if (!usedHere.has(name)) unused.push(`${file}#${name}`);
  }
  return unused.sort();
}

test("every export of src/ and workers/ is imported somewhere", () => {
  expect(unusedExports()).toEqual([]);
}, 60_000);

test("the check finds an export nothing imports", () => {
  // A name exported from src/ that no file imports, as a new one would be.
  expect(unusedExports(new Map([["src/shared/bytes.ts", "export const NOBODY_IMPORTS_THIS = 1;\n"]]))).toEqual(["src/shared/bytes.ts#NOBODY_IMPORTS_THIS"]);
}, 60_000);
