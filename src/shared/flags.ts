/**
 * The contract of one `llmgw <command>`: its flags (node:util parseArgs
 * options), its help text and its entry point. Parsing is strict: an unknown
 * flag or a missing value prints usage and exits 2.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";

type OptionSpec = NonNullable<ParseArgsConfig["options"]>;

export interface CommandSpec<O extends OptionSpec = OptionSpec> {
  name: string;
  summary: string;
  /** Usage text printed by --help and on a usage error (without the trailing newline). */
  usage: string;
  options: O;
  /** Whether positional arguments (sub-commands) are accepted. */
  allowPositionals?: boolean;
  run(args: ParsedArgs): Promise<number>;
  /**
   * A command with sub-commands of their own flags (bench, ctl) takes the raw
   * arguments instead; it throws UsageError for bad ones.
   */
  dispatch?(argv: string[]): Promise<number>;
}

export interface ParsedArgs {
  values: Record<string, string | boolean | string[] | boolean[] | undefined>;
  positionals: string[];
}

/** Thrown for a usage error; the CLI prints the message and (unless `showUsage` is false: the flags were right, what they named was not) the usage, exits 2. */
export class UsageError extends Error {
  readonly showUsage: boolean;
  constructor(message: string, opts: { showUsage?: boolean } = {}) {
    super(message);
    this.name = "UsageError";
    this.showUsage = opts.showUsage ?? true;
  }
}

export function parseCommandArgs(spec: CommandSpec, argv: string[]): ParsedArgs {
  try {
    const { values, positionals } = parseArgs({
      args: argv,
      options: { ...spec.options, help: { type: "boolean", short: "h" } },
      allowPositionals: spec.allowPositionals ?? false,
      strict: true,
    });
    return { values: values as ParsedArgs["values"], positionals };
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** Typed accessors over parsed flags, turning bad values into usage errors. */
export function stringFlag(args: ParsedArgs, name: string): string | undefined {
  const v = args.values[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string") throw new UsageError(`--${name} expects a value`);
  return v;
}

export function stringListFlag(args: ParsedArgs, name: string): string[] {
  const v = args.values[name];
  if (v === undefined) return [];
  if (Array.isArray(v)) return v.map(String);
  return [String(v)];
}

export function boolFlag(args: ParsedArgs, name: string): boolean {
  return args.values[name] === true;
}

export function numberFlag(args: ParsedArgs, name: string, fallback: number, opts: { min?: number; max?: number; integer?: boolean } = {}): number {
  const raw = stringFlag(args, name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  const { min = -Infinity, max = Infinity, integer = false } = opts;
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    const kind = integer ? "an integer" : "a number";
    const range = min > -Infinity || max < Infinity ? ` in [${min}, ${max}]` : "";
    throw new UsageError(`--${name}: expected ${kind}${range}, got '${raw}'`);
  }
  return n;
}

/** "host:port" → parts; a bare port means 127.0.0.1. */
export function parseListen(value: string, flag: string): { host: string; port: number } {
  const m = /^(?:\[?([^\]]*)\]?:)?(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m || port > 65535) throw new UsageError(`${flag}: expected HOST:PORT, got '${value}'`);
  return { host: m[1] || "127.0.0.1", port };
}
