/**
 * A stream's identity (id, created, model) is read from its first chunk as
 * bytes when the envelope allows, and parsed otherwise: whichever way, it is
 * what JSON.parse of the chunk says, or nothing when the chunk has none.
 */
import { describe, expect, test } from "bun:test";
import { identityOf } from "../../src/gateway/continuation/stream-tracker.ts";

const enc = new TextEncoder();
const parsed = (payload: string) => {
  const j = JSON.parse(payload) as Record<string, unknown>;
  return typeof j.id === "string" && typeof j.created === "number" && typeof j.model === "string"
    ? { id: j.id, created: j.created, model: j.model }
    : undefined;
};

const CHUNKS: Record<string, string> = {
  vllm: '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1760000000,"model":"org/model","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}',
  "sglang, spaces":
    '{"id": "abc", "object": "chat.completion.chunk", "created": 1760000001, "model": "m", "choices": [{"index": 0, "delta": {"content": "x"}}]}',
  "escaped id (parsed)": '{"id":"a\\"b","object":"chat.completion.chunk","created":1,"model":"m","choices":[]}',
  "non-ASCII model (parsed)": '{"id":"a","created":1,"model":"modèle","choices":[]}',
  "choices first, a tool call's id inside (parsed)": '{"choices":[{"delta":{"tool_calls":[{"id":"call_1"}]}}],"id":"real","created":2,"model":"m"}',
  "created not an integer (parsed)": '{"id":"a","created":1.5e9,"model":"m","choices":[]}',
  "no model": '{"id":"a","created":1,"choices":[]}',
  "created a string": '{"id":"a","created":"1","model":"m","choices":[]}',
  "no choices (parsed)": '{"id":"a","created":3,"model":"m"}',
};

describe("identityOf", () => {
  for (const [name, payload] of Object.entries(CHUNKS)) {
    for (const prefix of ["data: ", "data:"]) {
      test(`${name}, '${prefix}'`, () => {
        expect(identityOf(enc.encode(prefix + payload))).toEqual(parsed(payload));
      });
    }
  }
  test("not a data line, or not JSON: none", () => {
    expect(identityOf(enc.encode(": keep-alive"))).toBeUndefined();
    expect(identityOf(enc.encode("data: {not json"))).toBeUndefined();
  });
});
