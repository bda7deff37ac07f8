/**
 * An upload's lines are checked where their bytes lie (json-line-scan.ts);
 * creating a batch checks them the slow way (decode, JSON.parse). The two
 * must give every line the same verdict and the same message: here on
 * hand-written lines and on tens of thousands of seeded mutations of them
 * (bytes flipped, dropped, doubled, cut short; JSON's special characters and
 * broken UTF-8 put in), with the scan's own acceptances checked against
 * JSON.parse and TextDecoder directly.
 */
import { describe, expect, test } from "bun:test";
import { BatchInputValidator } from "../../src/jobs/batch-input.ts";
import { JsonLineScanner, LineKey } from "../../src/jobs/json-line-scan.ts";

const encoder = new TextEncoder();
const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function verdict(line: Uint8Array, bodies: boolean): string {
  const v = new BatchInputValidator({ maxLines: 10, knownModel: (m) => m !== "unknown-model", maxLineBytes: 1 << 20, maxDepth: 8, bodies });
  try {
    const lines = [...v.push(line), ...v.end().lines];
    return JSON.stringify(lines.map((l) => [l.customId, l.url]));
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const SEEDS: string[] = [
  `{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"hello"}}`,
  `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[{"role":"user","content":"hi \\"there\\" \\u00e9\\n"}],"max_tokens":16,"temperature":0.7e-1}}`,
  `  { "custom_id" : "b\\u0041" , "method":"POST" , "url":"/v1/completions", "body" : { "model":"m", "prompt":[1,2,-3.5E+2], "stream":false } }  `,
  `{"custom_id":"c","method":"POST","url":"/v1/completions","body":{"model":"m","prompt":[],"stream":true}}`,
  `{"custom_id":"d","method":"POST","url":"/v1/chat/completions","body":{"model":"m","messages":[ ]}}`,
  `{"custom_id":"e","method":"GET","url":"/v1/embeddings","body":{"model":"m","input":["x","y"]}}`,
  `{"custom_id":"","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"x"}}`,
  `{"custom_id":"f","method":"POST","url":"/v1/other","body":{"model":"m","input":"x"}}`,
  `{"custom_id":"g","method":"POST","url":"/v1/embeddings","body":[1]}`,
  `{"custom_id":"h","method":"POST","url":"/v1/embeddings","body":{"model":"unknown-model","input":"x"}}`,
  `{"custom_id":"i","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":{"a":[[[[1]]]]}}}`,
  `{"custom_id":"j","method":"POST","url":"/v1/embeddings","body":{"model":"m"},"body":{"input":"x"}}`,
  `{"custom_id":"k","method":"POST","url":"/v1/embeddings","body":5,"body":{"model":"m","input":"x"}}`,
  `{"custom_id":"l","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"x","stream":null,"extra":{"model":"z","stream":true}}}`,
  `{"custom_id":"m","method":"POST","url":"/v1/embeddings","body":{"mod\\u0065l":"m","input":"x"}}`,
  `{"custom_id":"日本語 ✓ 😀","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"Grüße, 世界 😀"}}`,
  `{"custom_id":12,"method":"POST","url":"/v1/embeddings","body":{"model":"m","input":"x"}}`,
  `{"custom_id":"n","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":true,"nested":[{},[],"",0,-0,0.0,1e5,null,false]}}`,
  `[{"custom_id":"o"}]`,
  `{}`,
  `"text"`,
];

/** Seeded xorshift: the same mutations every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 2 ** 32;
  };
}

const SPECIAL = encoder.encode(`{}[]:,"\\ \t\r0-.eE+tfnu/`);
const BROKEN_UTF8 = [[0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xff], [0xef, 0xbb, 0xbf], [0x00], [0x1f], [0x7f]];

function mutate(line: Uint8Array, r: () => number): Uint8Array {
  const b = [...line];
  const edits = 1 + Math.floor(r() * 3);
  for (let e = 0; e < edits; e++) {
    const at = Math.floor(r() * (b.length + 1));
    const kind = Math.floor(r() * 6);
    if (kind === 0) b[at] = SPECIAL[Math.floor(r() * SPECIAL.length)]!;
    else if (kind === 1) b.splice(at, 1);
    else if (kind === 2) b.splice(at, 0, b[at] ?? 0x20);
    else if (kind === 3) b.splice(at, 0, ...BROKEN_UTF8[Math.floor(r() * BROKEN_UTF8.length)]!);
    else if (kind === 4) b.splice(at, 0, SPECIAL[Math.floor(r() * SPECIAL.length)]!);
    else b.length = Math.min(b.length, at);
  }
  return new Uint8Array(b);
}

describe("an upload's line scan and batch creation's JSON.parse", () => {
  test("the hand-written lines: the same verdict and message, the plain ones taken by the scan itself", () => {
    const scanner = new JsonLineScanner(8);
    let scanned = 0;
    for (const seed of SEEDS) {
      const line = encoder.encode(seed);
      expect({ seed, fast: verdict(line, false) }).toEqual({ seed, fast: verdict(line, true) });
      if (scanner.scan(line)) scanned++;
    }
    // All but the escaped key, the non-objects and nothing else go the fast way.
    expect(scanned).toBe(SEEDS.length - 3);
  });

  test("60,000 seeded mutations: the same verdict and message for every one; what the scan accepts JSON.parse accepts", () => {
    const r = rng(20261202);
    const scanner = new JsonLineScanner(8);
    let accepted = 0;
    let refused = 0;
    for (let n = 0; n < 60_000; n++) {
      const line = mutate(encoder.encode(SEEDS[n % SEEDS.length]!), r);
      const fast = verdict(line, false);
      const slow = verdict(line, true);
      if (fast !== slow) expect({ line: [...line], fast }).toEqual({ line: [...line], fast: slow });
      if (scanner.scan(line)) {
        accepted++;
        const text = fatal.decode(line); // throws on bad UTF-8
        expect(JSON.parse(text)).toBeInstanceOf(Object);
      } else refused++;
    }
    // Both sides of the scan are exercised, not only one.
    expect(accepted).toBeGreaterThan(5_000);
    expect(refused).toBeGreaterThan(5_000);
  });

  test("the values' places: each span is the value as written, the last of duplicate keys, body keys only in the body", () => {
    const scanner = new JsonLineScanner(8);
    const line = encoder.encode(
      `{"model":"top","custom_id":"x","body":{"model":"first","input":[1, 2]},"custom_id":"y","body":{"input":"s","stream":true,"deep":{"model":"no"}}}`,
    );
    expect(scanner.scan(line)).toBe(true);
    const text = (key: LineKey) => {
      const start = scanner.spans[2 * key]!;
      return start < 0 ? undefined : new TextDecoder().decode(line.subarray(start, scanner.spans[2 * key + 1]));
    };
    expect(text(LineKey.CustomId)).toBe(`"y"`);
    expect(text(LineKey.Model)).toBeUndefined(); // the second body has none; the first one's is gone with it
    expect(text(LineKey.Input)).toBe(`"s"`);
    expect(text(LineKey.Stream)).toBe("true");
    expect(text(LineKey.Body)).toBe(`{"input":"s","stream":true,"deep":{"model":"no"}}`);
  });

  test("nesting past the limit is left to the slow way, which names it", () => {
    const deep = encoder.encode(`{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"model":"m","input":${"[".repeat(20)}${"]".repeat(20)}}}`);
    expect(new JsonLineScanner(8).scan(deep)).toBe(false);
    expect(verdict(deep, false)).toBe("line 1: nested deeper than 8 levels (batch.max_line_depth)");
  });
});
