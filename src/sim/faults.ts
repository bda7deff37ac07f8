/**
 * Injected faults of the sim-engine: the closed set of fault names the
 * gateway's tests depend on, parsed from `--fault-types`, `POST /sim/config`
 * and the per-request `x-sim-fault` header.
 */

export type Fault =
  | { kind: "500" }
  | { kind: "429" }
  | { kind: "503" }
  /** Never send response headers; hold the connection until the client leaves. */
  | { kind: "no-headers" }
  /** 200 + SSE headers, then nothing (non-stream: hold). */
  | { kind: "no-first-token" }
  /** Send N tokens, then stall without closing. */
  | { kind: "stall"; tokens: number }
  /** Send N tokens, then cut the connection (no [DONE]). */
  | { kind: "cut"; tokens: number }
  /** One token every `intervalMs` instead of the engine's ITL. */
  | { kind: "slow"; intervalMs: number };

export const FAULT_HEADER = "x-sim-fault";

const COUNT_MAX = 1_000_000;
const SLOW_MAX_MS = 600_000;

/** Parse one fault name (`500`, `stall:3`, `slow:200` …); undefined when not a fault name. */
export function parseFault(raw: string): Fault | undefined {
  const text = raw.trim();
  switch (text) {
    case "500":
    case "429":
    case "503":
    case "no-headers":
    case "no-first-token":
      return { kind: text };
    default:
      break;
  }
  const m = /^(stall|cut|slow):(\d+)$/.exec(text);
  if (!m) return undefined;
  const n = Number(m[2]);
  switch (m[1]) {
    case "stall":
      return n <= COUNT_MAX ? { kind: "stall", tokens: n } : undefined;
    case "cut":
      return n <= COUNT_MAX ? { kind: "cut", tokens: n } : undefined;
    default:
      return n >= 1 && n <= SLOW_MAX_MS ? { kind: "slow", intervalMs: n } : undefined;
  }
}

/** The canonical name of a fault (what `parseFault` reads back). */
export function faultName(f: Fault): string {
  switch (f.kind) {
    case "stall":
    case "cut":
      return `${f.kind}:${f.tokens}`;
    case "slow":
      return `slow:${f.intervalMs}`;
    default:
      return f.kind;
  }
}

/** Parse a comma list; throws with the offending name. */
export function parseFaultList(items: readonly string[]): Fault[] {
  const out: Fault[] = [];
  for (const item of items.flatMap((s) => s.split(","))) {
    if (item.trim() === "") continue;
    const f = parseFault(item);
    if (!f) throw new Error(`unknown fault type '${item.trim()}' (expected 500, 429, 503, no-headers, no-first-token, stall:N, cut:N, slow:MS)`);
    out.push(f);
  }
  return out;
}

/**
 * The fault for one request: the header wins; otherwise with probability
 * `rate` one of `types` picked uniformly. `random` is injectable for tests.
 */
export function chooseFault(
  header: string | null,
  rate: number,
  types: readonly Fault[],
  random: () => number = Math.random,
): Fault | undefined | "bad-header" {
  if (header !== null && header.trim() !== "") return parseFault(header) ?? "bad-header";
  if (rate <= 0 || types.length === 0) return undefined;
  if (random() >= rate) return undefined;
  return types[Math.min(types.length - 1, Math.floor(random() * types.length))];
}
