import { describe, expect, test } from "bun:test";
import type { RelayOwner } from "../../src/gateway/proxy/relay.ts";
import { relayBody } from "../../src/gateway/proxy/sse-response.ts";
import { MAX_EVENT_BYTES, SseScanner } from "../../src/gateway/proxy/sse-scanner.ts";
import { openStreamOf } from "../helpers/scripted-stream.ts";

const enc = new TextEncoder();
const TOKEN = (i: number) => `data: {"id":"x","choices":[{"index":0,"delta":{"content":"t${i}"}}],"usage":null}\n\n`;
const USAGE = `data: {"id":"x","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}\n\n`;
const DONE = "data: [DONE]\n\n";

describe("SSE scanner", () => {
  test("finds events split anywhere across chunks, and classifies them", () => {
    const text = TOKEN(0) + ": keep-alive\n\n" + USAGE + 'data: {"error":{"message":"boom"}}\n\n' + "data: {cut\n\n" + DONE;
    const bytes = enc.encode(text);
    for (const size of [1, 2, 3, 7, 64, bytes.length]) {
      const s = new SseScanner();
      const kinds: string[] = [];
      for (let i = 0; i < bytes.length; i += size) kinds.push(...s.push(bytes.subarray(i, i + size)).map((e) => e.kind));
      expect({ size, kinds }).toEqual({ size, kinds: ["data", "comment", "usage", "error", "malformed", "done"] });
      expect(s.pending()).toBe(0);
    }
  });

  test("accepts CRLF blank lines, split anywhere", () => {
    const s = new SseScanner();
    expect(s.push(enc.encode('data: {"a":1}\n\r\ndata: [DONE]\n\r\n')).map((e) => e.kind)).toEqual(["data", "done"]);
    const bytes = enc.encode('data: {"a":1}\ndata: {"b":2}\n\r\n: note\n\ndata: [DONE]\n\r\n');
    for (const size of [1, 2, 3, 5]) {
      const t = new SseScanner();
      const kinds: string[] = [];
      for (let i = 0; i < bytes.length; i += size) kinds.push(...t.push(bytes.subarray(i, i + size)).map((e) => e.kind));
      expect({ size, kinds }).toEqual({ size, kinds: ["data", "comment", "done"] });
      expect(t.pending()).toBe(0);
    }
  });

  test("a long multi-line event in small chunks costs linear time, not quadratic", () => {
    // "x…x\n" lines in 1 KiB chunks: every chunk holds a lone LF, none a blank line.
    const line = enc.encode("x".repeat(63) + "\n");
    const chunk = new Uint8Array(1024);
    for (let i = 0; i < 1024; i += 64) chunk.set(line, i);
    const scan = (mib: number): number => {
      const s = new SseScanner();
      s.push(enc.encode("data: {"));
      let early = 0;
      const t0 = performance.now();
      for (let i = 0; i < mib * 1024; i++) early += s.push(chunk).length;
      const ms = performance.now() - t0;
      expect(early).toBe(0);
      expect(s.pending()).toBe(mib * 1024 * 1024 + 7);
      const events = s.push(enc.encode("\n"));
      expect(events.map((e) => e.bytes.length)).toEqual([mib * 1024 * 1024 + 8]);
      return ms;
    };
    // The fastest of several runs each: a stall of this shared machine can
    // lengthen a run, never shorten one, so the minimum is the scanner's cost.
    const fastest = (mib: number, runs: number): number => Math.min(...Array.from({ length: runs }, () => scan(mib)));
    scan(1); // warm-up
    // Linear: ~8×. Re-copying the tail on every chunk: ~64×. A busy host's stall can only
    // lengthen the 8 MiB runs (all seven 1 MiB runs stalling is the unlikely way back),
    // so a ratio under the bound in any of three tries is the scanner's, and a quadratic
    // scanner never shows one.
    const ratios: number[] = [];
    for (let attempt = 0; attempt < 3 && !(ratios.at(-1)! < 24); attempt++) ratios.push(fastest(8, 3) / Math.max(fastest(1, 7), 0.5));
    expect(Math.min(...ratios)).toBeLessThan(24);
  });

  test("a large event in many chunks without newlines comes out whole", () => {
    const s = new SseScanner();
    const content = "y".repeat(100_000);
    const event = `data: {"choices":[{"delta":{"content":"${content}"}}]}\n\n`;
    const bytes = enc.encode(event);
    const out = [];
    for (let i = 0; i < bytes.length; i += 1000) out.push(...s.push(bytes.subarray(i, i + 1000)));
    expect(out.map((e) => e.kind)).toEqual(["data"]);
    expect(new TextDecoder().decode(out[0]!.bytes)).toBe(event);
    expect(s.pending()).toBe(0);
  });

  test("an event that never ends past MAX_EVENT_BYTES marks the stream broken and holds no memory", () => {
    const s = new SseScanner();
    s.push(enc.encode(TOKEN(0)));
    s.push(enc.encode('data: {"choices":[{"delta":{"content":"'));
    const junk = new Uint8Array(1024 * 1024).fill(120);
    let events = 0;
    for (let i = 0; i < MAX_EVENT_BYTES / junk.length - 1; i++) events += s.push(junk).length;
    expect(s.overflowed).toBe(false); // just under the limit: still an event in progress
    expect(s.pending()).toBeGreaterThan(MAX_EVENT_BYTES - junk.length);
    events += s.push(junk).length + s.push(junk).length;
    expect(s.overflowed).toBe(true);
    expect(events).toBe(0);
    expect(s.pending()).toBe(0);
  });
});

/** How a relay ended, as its owner (the request's Exchange) heard it. */
type RelayEnd = { outcome: string; failure?: string | undefined; message?: string | undefined };

/** A RelayOwner that records what the relay reports. */
function recordingOwner(includeUsage: boolean) {
  const ends: RelayEnd[] = [];
  let failure: string | undefined;
  const owner: RelayOwner & { malformedCount: number; ends: RelayEnd[] } = {
    includeUsage,
    choices: 1,
    delivered: 0,
    usage: undefined,
    malformedCount: 0,
    ends,
    firstToken() {},
    tokens() {},
    malformed() {
      this.malformedCount++;
    },
    endAttempt(v) {
      failure = v.failure;
    },
    finish(outcome, _status, error) {
      ends.push(outcome === "ok" || outcome === "cancelled" ? { outcome } : { outcome, failure, message: error });
    },
  };
  return owner;
}

async function relay(chunks: (string | Error)[], includeUsage: boolean) {
  const owner = recordingOwner(includeUsage);
  const text = await new Response(relayBody(owner, openStreamOf(chunks))).text();
  return { payloads: text.split("\n\n").filter(Boolean), ends: owner.ends, malformed: owner.malformedCount, usage: owner.usage };
}

describe("SSE relay", () => {
  test("passes tokens through, records usage, and drops the usage chunk unless asked", async () => {
    const hidden = await relay([TOKEN(0), TOKEN(1), USAGE, DONE], false);
    expect(hidden.payloads).toEqual([TOKEN(0).trim(), TOKEN(1).trim(), "data: [DONE]"]);
    expect(hidden.usage).toEqual({ prompt_tokens: 7, completion_tokens: 2 });
    expect(hidden.ends).toEqual([{ outcome: "ok" }]);
    const shown = await relay([TOKEN(0), USAGE + DONE], true);
    expect(shown.payloads).toEqual([TOKEN(0).trim(), USAGE.trim(), "data: [DONE]"]);
  });

  test("a whole answer read in one chunk has its first token before its finish (the time to first token is recorded)", async () => {
    const owner = recordingOwner(false);
    const seen: string[] = [];
    owner.firstToken = () => seen.push("first");
    owner.finish = () => seen.push("finish");
    await new Response(relayBody(owner, openStreamOf([TOKEN(0) + TOKEN(1) + DONE]))).text();
    expect(seen).toEqual(["first", "finish"]);
  });

  test("a stream that ends without [DONE] is finalised with an explicit error", async () => {
    const r = await relay([TOKEN(0), TOKEN(1)], false);
    expect(r.payloads.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(r.payloads.at(-2)!.slice(6)).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(r.ends[0]!.outcome).toBe("stream_error");
  });

  test("a broken connection mid-stream is finalised the same way", async () => {
    const r = await relay([TOKEN(0), new Error("socket closed")], false);
    expect(JSON.parse(r.payloads.at(-2)!.slice(6)).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(r.ends).toHaveLength(1);
  });

  test("malformed events are dropped and counted, never forwarded", async () => {
    const r = await relay([TOKEN(0), "data: {not json\n\n", "garbage line\n\n" + TOKEN(1), DONE], false);
    expect(r.payloads).toEqual([TOKEN(0).trim(), TOKEN(1).trim(), "data: [DONE]"]);
    expect(r.malformed).toBe(2);
  });

  test("an engine error event mid-stream becomes our error shape and ends the stream", async () => {
    const r = await relay([TOKEN(0), 'data: {"error":{"message":"engine died","code":500}}\n\n', TOKEN(1)], false);
    const err = JSON.parse(r.payloads.at(-2)!.slice(6)).error;
    expect(err.code).toBe("UPSTREAM_ERROR");
    expect(err.message).toBe("engine died");
    expect(r.payloads).not.toContain(TOKEN(1).trim());
  });
});

describe("SSE relay, engine quirks", () => {
  test("data:[DONE] without the space ends the stream cleanly", async () => {
    const r = await relay([TOKEN(0), "data:[DONE]\n\n"], false);
    expect(r.ends).toEqual([{ outcome: "ok" }]);
    expect(r.payloads).toEqual([TOKEN(0).trim(), "data: [DONE]"]);
  });

  test("an engine error event cancels the upstream (the engine stops generating)", async () => {
    let cancelled = false;
    const open = openStreamOf([TOKEN(0), 'data:{"error":{"message":"oom"}}\n\n', TOKEN(1), TOKEN(2)]);
    const reader = open.reader;
    const original = reader.cancel.bind(reader);
    reader.cancel = (reason?: unknown) => {
      cancelled = true;
      return original(reason);
    };
    const text = await new Response(relayBody(recordingOwner(false), open)).text();
    expect(text).toContain('"code":"UPSTREAM_ERROR"');
    await Bun.sleep(10);
    expect(cancelled).toBe(true);
  });
});

describe("SSE relay, chunks of several events", () => {
  test("the same bytes reach the client, and a cut stream ends with the explicit error", async () => {
    const ok = await relay([TOKEN(0) + TOKEN(1), TOKEN(2) + USAGE, DONE], false);
    expect(ok.payloads).toEqual([TOKEN(0).trim(), TOKEN(1).trim(), TOKEN(2).trim(), "data: [DONE]"]);
    expect(ok.usage).toEqual({ prompt_tokens: 7, completion_tokens: 2 });
    expect(ok.ends).toEqual([{ outcome: "ok" }]);
    const cut = await relay([TOKEN(0), TOKEN(1).slice(0, 20)], false);
    expect(cut.payloads.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(cut.payloads.at(-2)!.slice(6)).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(cut.payloads).not.toContain(TOKEN(1).slice(0, 20).trim());
  });
});

describe("SSE relay, an answer that finished without [DONE]", () => {
  const FINAL = `data: {"id":"x","choices":[{"index":0,"delta":{"content":"end"},"finish_reason": "stop"}],"usage":null}\n\n`;
  const SPACED_USAGE = `data: {"id": "x", "choices": [ ], "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}\n\n`;

  test("a finish_reason then a clean end is a finished answer: [DONE] is added, the outcome is ok", async () => {
    const r = await relay([TOKEN(0), FINAL], false);
    expect(r.payloads).toEqual([TOKEN(0).trim(), FINAL.trim(), "data: [DONE]"]);
    expect(r.ends).toEqual([{ outcome: "ok" }]);
  });

  test("usage written with spaces is still the usage chunk: recorded, and hidden unless asked for", async () => {
    const hidden = await relay([TOKEN(0), FINAL, SPACED_USAGE], false);
    expect(hidden.usage).toEqual({ prompt_tokens: 7, completion_tokens: 3 });
    expect(hidden.payloads).toEqual([TOKEN(0).trim(), FINAL.trim(), "data: [DONE]"]);
    const shown = await relay([TOKEN(0), FINAL, SPACED_USAGE], true);
    expect(shown.payloads).toEqual([TOKEN(0).trim(), FINAL.trim(), SPACED_USAGE.trim(), "data: [DONE]"]);
    expect(shown.ends).toEqual([{ outcome: "ok" }]);
  });

  test("the usage the client asked for never came: truncated", async () => {
    const r = await relay([TOKEN(0), FINAL], true);
    expect(JSON.parse(r.payloads.at(-2)!.slice(6)).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
    expect(r.ends[0]!.outcome).toBe("stream_error");
  });

  test("an end before any finish_reason is truncated", async () => {
    const r = await relay([TOKEN(0), TOKEN(1)], false);
    expect(JSON.parse(r.payloads.at(-2)!.slice(6)).error.code).toBe("UPSTREAM_STREAM_TRUNCATED");
  });
});
