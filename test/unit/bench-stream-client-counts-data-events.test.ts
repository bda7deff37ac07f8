/** The benches' stream client times data events only: an opening SSE comment is not a first token. */
import { expect, test } from "bun:test";
import { SseEventCounter } from "../../src/bench/stream-client.ts";

const enc = new TextEncoder();

test("comments do not count; events and boundaries split across chunks count once", () => {
  const c = new SseEventCounter();
  expect(c.push(enc.encode(": \n\n"))).toBe(0);
  expect(c.push(enc.encode('data: {"a":1}\n'))).toBe(0);
  expect(c.push(enc.encode("\n"))).toBe(1);
  expect(c.push(enc.encode('data: {"b":2}\n\ndata: [DONE]\n\n'))).toBe(2);
  expect(c.push(enc.encode(":"))).toBe(0);
  expect(c.push(enc.encode(" keep-alive\n\nda"))).toBe(0);
  expect(c.push(enc.encode("ta: x\n\n"))).toBe(1);
});

test("an event that starts with a blank line is still one event", () => {
  const c = new SseEventCounter();
  expect(c.push(enc.encode("\n\n\ndata: x\n\n"))).toBe(1);
});
