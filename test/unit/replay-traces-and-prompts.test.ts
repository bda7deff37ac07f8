/**
 * Trace replay's pure parts: the Azure CSV and Mooncake JSON-lines parsers
 * (literal samples, bad input, the shipped files), windowing, and prompts
 * built from Mooncake's block ids — a shared block is byte-identical, a fresh
 * id gives fresh text, lengths are the trace's by the sim's own token count.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { azureTimestampMs, parseAzureCsv } from "../../src/bench/replay/azure-trace.ts";
import { parseMooncakeJsonl } from "../../src/bench/replay/mooncake-trace.ts";
import { keyText, PromptTextCache, segmentTokens, traceSegments } from "../../src/bench/replay/prompt-text.ts";
import { type Trace, TraceFormatError, tracePrefixShare, traceWindow } from "../../src/bench/replay/trace.ts";
import { parseTraceText, SHIPPED_TRACES, TRACES_DIR } from "../../src/bench/replay/trace-files.ts";
import { schedule } from "../../src/bench/replay-scenario.ts";
import { parseGenerationRequest } from "../../src/sim/openai-request.ts";
import { CHARS_PER_TOKEN, textPrompt } from "../../src/sim/tokens.ts";

// The first rows of the published files, as they are (CRLF line ends in the Azure CSV).
const AZURE =
  "TIMESTAMP,ContextTokens,GeneratedTokens\r\n2023-11-16 18:15:46.6805900,374,44\r\n2023-11-16 18:15:50.9951690,396,109\r\n2023-11-16 18:15:51.0000000,879,31\r\n";
const MOONCAKE = [
  '{"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]}',
  '{"timestamp": 0, "input_length": 7322, "output_length": 490, "hash_ids": [0, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27]}',
  '{"timestamp": 3000, "input_length": 1100, "output_length": 7, "hash_ids": [0, 1, 99]}',
].join("\n");

describe("Azure CSV", () => {
  test("arrivals relative to the first, from wall-clock timestamps with 100 ns digits", () => {
    const t = parseAzureCsv(AZURE);
    expect(t.format).toBe("azure-csv");
    expect(t.requests.map((r) => [Math.round(r.atMs * 1000) / 1000, r.inputTokens, r.outputTokens])).toEqual([
      [0, 374, 44],
      [4314.579, 396, 109],
      [4319.41, 879, 31],
    ]);
    expect(t.requests[0]!.blockIds).toBeUndefined();
    expect(azureTimestampMs("2023-11-16 18:15:46.68059") - azureTimestampMs("2023-11-16 18:15:46")).toBeCloseTo(680.59, 3);
  });

  test("columns found by name; unsorted rows are put in arrival order", () => {
    const t = parseAzureCsv("GeneratedTokens,TIMESTAMP,ContextTokens\n5,2023-11-16 10:00:02,20\n7,2023-11-16 10:00:01,10\n");
    expect(t.requests.map((r) => [r.atMs, r.inputTokens, r.outputTokens])).toEqual([
      [0, 10, 7],
      [1000, 20, 5],
    ]);
  });

  test("bad input names its line and what was expected", () => {
    const bad: [string, RegExp][] = [
      ["time,in,out\n1,2,3\n", /line 1: expected a header with TIMESTAMP/],
      ["TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12\n", /line 2: expected 3 fields, got 2/],
      ["TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,12,4\n", /line 2: TIMESTAMP: expected/],
      ["TIMESTAMP,ContextTokens,GeneratedTokens\n2023-02-30 00:00:00,12,4\n", /line 2: TIMESTAMP/],
      [
        "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12,4\n2023-11-16 18:15:47,-1,4\n",
        /line 3: ContextTokens: expected an integer ≥ 1, got '-1'/,
      ],
      ["TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,12,0\n", /line 2: GeneratedTokens/],
      ["TIMESTAMP,ContextTokens,GeneratedTokens\r\n", /no requests/],
    ];
    for (const [text, message] of bad) expect(() => parseAzureCsv(text, "t.csv")).toThrow(message);
    expect(() => parseAzureCsv("x")).toThrow(TraceFormatError);
  });
});

describe("Mooncake JSON lines", () => {
  test("arrivals, lengths and block ids as recorded", () => {
    const t = parseMooncakeJsonl(MOONCAKE);
    expect(t.format).toBe("mooncake-jsonl");
    expect(t.spanMs).toBe(3000);
    expect(t.requests.map((r) => [r.atMs, r.inputTokens, r.outputTokens, r.blockIds!.length])).toEqual([
      [0, 6758, 500, 14],
      [0, 7322, 490, 15],
      [3000, 1100, 7, 3],
    ]);
  });

  test("bad input names its line and what was expected", () => {
    const line = (o: Record<string, unknown>) => JSON.stringify({ timestamp: 0, input_length: 600, output_length: 3, hash_ids: [1, 2], ...o });
    const bad: [string, RegExp][] = [
      [`${line({})}\n{"timestamp": 1,`, /line 2: not JSON/],
      ["[1,2]", /line 1: expected a JSON object/],
      [line({ timestamp: -5 }), /timestamp: expected ms ≥ 0, got -5/],
      [line({ input_length: 0 }), /input_length: expected an integer ≥ 1/],
      [line({ output_length: 1.5 }), /output_length: expected an integer ≥ 1, got 1.5/],
      [line({ hash_ids: [1, "a"] }), /hash_ids: expected a list of integers/],
      [line({ hash_ids: [1, 2, 3] }), /3 ids for input_length 600; expected 2 \(one per 512-token block\)/],
      ["\n\n", /no requests/],
    ];
    for (const [text, message] of bad) expect(() => parseMooncakeJsonl(text, "t.jsonl")).toThrow(message);
  });
});

describe("the shipped traces", () => {
  const expected: Record<string, { requests: number; format: Trace["format"]; withBlockIds: number }> = {
    "azure-conv": { requests: 19_366, format: "azure-csv", withBlockIds: 0 },
    "azure-code": { requests: 8_819, format: "azure-csv", withBlockIds: 0 },
    "mooncake-conversation": { requests: 12_031, format: "mooncake-jsonl", withBlockIds: 12_031 },
    "mooncake-synthetic": { requests: 3_993, format: "mooncake-jsonl", withBlockIds: 3_993 },
  };
  for (const [name, want] of Object.entries(expected)) {
    test(`${name}: every row parses, in arrival order`, () => {
      const file = SHIPPED_TRACES[name]!;
      const t = parseTraceText(readFileSync(join(TRACES_DIR, file), "utf8"), file);
      expect({ requests: t.requests.length, format: t.format, withBlockIds: t.requests.filter((r) => r.blockIds !== undefined).length }).toEqual(want);
      expect(t.requests[0]!.atMs).toBe(0);
      expect(t.requests.every((r, i) => i === 0 || t.requests[i - 1]!.atMs <= r.atMs)).toBe(true);
      // About an hour each (the synthetic one ~17 minutes), as their README says.
      expect(t.spanMs / 60_000).toBeGreaterThan(name === "mooncake-synthetic" ? 16 : 55);
    });
  }

  test("the licence and attribution notes are beside the files", () => {
    const readme = readFileSync(join(TRACES_DIR, "README.md"), "utf8");
    for (const file of Object.values(SHIPPED_TRACES)) expect(readme).toContain(file);
    expect(readme).toContain("CC BY 4.0");
    expect(readme).toContain("Splitwise");
    expect(readme).toContain("Mooncake: A KVCache-centric");
    expect(readFileSync(join(TRACES_DIR, "LICENSE-Apache-2.0.txt"), "utf8")).toContain("Apache License");
  });
});

test("a window keeps the arrivals in it, relative to its start, with each request's place in the trace", () => {
  const t = parseMooncakeJsonl(MOONCAKE);
  expect(traceWindow(t, 0, 1).map((r) => [r.index, r.atMs])).toEqual([
    [0, 0],
    [1, 0],
  ]);
  expect(traceWindow(t, 2, 5).map((r) => [r.index, r.atMs])).toEqual([[2, 1000]]);
  expect(schedule(traceWindow(t, 0, 10), 4).map((s) => s.atMs)).toEqual([0, 0, 750]);
});

test("the trace's own prefix sharing: tokens in blocks whose whole chain an earlier request had", () => {
  const t = parseMooncakeJsonl(MOONCAKE);
  // Request 2 reuses block 0 of request 1 (512 tokens); request 3 reuses blocks 0 and 1 of request 1 (1024).
  expect(tracePrefixShare(t.requests)).toBeCloseTo((512 + 1024) / (6758 + 7322 + 1100), 9);
  // A block id seen before, but after a different block, is not a prefix hit.
  const moved = parseMooncakeJsonl(
    '{"timestamp": 0, "input_length": 1024, "output_length": 1, "hash_ids": [1, 2]}\n{"timestamp": 1, "input_length": 1024, "output_length": 1, "hash_ids": [3, 2]}',
  );
  expect(tracePrefixShare(moved.requests)).toBe(0);
  expect(tracePrefixShare(parseAzureCsv(AZURE).requests)).toBeUndefined();
});

describe("prompts from block ids", () => {
  const [a, b, c] = parseMooncakeJsonl(MOONCAKE).requests;
  const cache = new PromptTextCache();
  const pa = cache.prompt(traceSegments(a!, 0));
  const pb = cache.prompt(traceSegments(b!, 1));
  const pc = cache.prompt(traceSegments(c!, 2));
  const BLOCK = 512 * CHARS_PER_TOKEN;

  test("the sim counts exactly input_length tokens, and no tail of it as its own output", () => {
    for (const [p, r] of [
      [pa, a],
      [pb, b],
      [pc, c],
    ] as const) {
      expect(p.length).toBe(r!.inputTokens * CHARS_PER_TOKEN);
      const parsed = textPrompt(p, 16);
      expect({ count: parsed.count, continued: parsed.continued }).toEqual({ count: r!.inputTokens, continued: 0 });
    }
    // …and through the sim's request parser, as a completions request with ignore_eos.
    const body = JSON.stringify({ model: "m", prompt: pc, max_tokens: 7, ignore_eos: true, stream: true });
    const req = parseGenerationRequest("completion", body, { models: ["m"], maxModelLen: 4096, blockSize: 16, outputLen: 2 });
    expect({ prompt: req.prompt.count, output: req.outputTokens }).toEqual({ prompt: 1100, output: 7 });
  });

  test("a shared block id gives byte-identical text; a fresh id gives fresh text", () => {
    // a and b share block 0 only; a and c share blocks 0 and 1.
    expect(pb.slice(0, BLOCK)).toBe(pa.slice(0, BLOCK));
    expect(pb.slice(BLOCK, 2 * BLOCK)).not.toBe(pa.slice(BLOCK, 2 * BLOCK));
    expect(pc.slice(0, 2 * BLOCK)).toBe(pa.slice(0, 2 * BLOCK));
    expect(pc.slice(2 * BLOCK)).not.toBe(pa.slice(2 * BLOCK, 2 * BLOCK + pc.length - 2 * BLOCK));
    // So the engine's prefix cache sees exactly that sharing, block for block (16-token KV blocks).
    const ha = textPrompt(pa, 16).blockHashes;
    const hb = textPrompt(pb, 16).blockHashes;
    const hc = textPrompt(pc, 16).blockHashes;
    const shared = (x: readonly bigint[], y: readonly bigint[]) => x.findIndex((h, i) => h !== y[i]);
    expect(shared(ha, hb)).toBe(32);
    expect(shared(ha, hc)).toBe(64);
  });

  test("a partial last block is a prefix of the same block whole; texts are the same run to run", () => {
    const whole = keyText("block-99", BLOCK);
    expect(pc.slice(2 * BLOCK)).toBe(whole.slice(0, (1100 - 1024) * CHARS_PER_TOKEN));
    expect(new PromptTextCache().segment("block-99", 512)).toBe(whole);
    expect(keyText("block-7", 100)).toBe(keyText("block-7", 100));
  });

  test("a request without block ids gets a prompt of its own", () => {
    const [x, y] = parseAzureCsv(AZURE).requests;
    const sx = traceSegments(x!, 0);
    const sy = traceSegments(y!, 1);
    expect(segmentTokens(sx)).toBe(374);
    const tx = cache.prompt(sx);
    const ty = cache.prompt(sy);
    expect(tx.length).toBe(374 * CHARS_PER_TOKEN);
    expect(ty.slice(0, 64)).not.toBe(tx.slice(0, 64));
  });

  test("the cache stays within its bound and still gives the same text", () => {
    const small = new PromptTextCache(3 * BLOCK);
    const first = small.segment("block-1", 512);
    for (let i = 2; i < 10; i++) small.segment(`block-${i}`, 512);
    expect(small.segment("block-1", 512)).toBe(first);
  });
});
