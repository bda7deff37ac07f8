/** Reading a body under a byte limit: declared lengths, streamed bodies without one, and the exact limit. */
import { expect, test } from "bun:test";
import { bodyDeadlines, bodyReadWhole, readBodyUpTo } from "../../src/shared/bounded-body.ts";
import { LlmgwError } from "../../src/shared/errors.ts";

function streamed(parts: string[]): Request {
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(enc.encode(p));
      c.close();
    },
  });
  return new Request("http://x/", { method: "POST", body });
}

test("at the limit is read whole; one byte over is refused, declared or streamed", async () => {
  expect(new TextDecoder().decode(await readBodyUpTo(new Request("http://x/", { method: "POST", body: "12345" }), 5))).toBe("12345");
  expect(await readBodyUpTo(new Request("http://x/", { method: "POST", body: "123456" }), 5)).toBeUndefined();
  expect(await readBodyUpTo(new Request("http://x/", { method: "POST", headers: { "content-length": "999" }, body: "1" }), 5)).toBeUndefined();
  expect(streamed(["12", "34"]).headers.get("content-length")).toBeNull();
  expect(new TextDecoder().decode(await readBodyUpTo(streamed(["12", "34"]), 4))).toBe("1234");
  expect(await readBodyUpTo(streamed(["12", "34", "5"]), 4)).toBeUndefined();
  expect((await readBodyUpTo(new Request("http://x/", { method: "POST" }), 4))?.byteLength).toBe(0);
});

test("a body read to its end is marked so; one refused as too large, or cut, is not", async () => {
  const whole = streamed(["12", "34"]);
  await readBodyUpTo(whole, 4);
  expect(bodyReadWhole(whole)).toBe(true);
  const over = streamed(["12", "34", "5"]);
  await readBodyUpTo(over, 4);
  expect(bodyReadWhole(over)).toBe(false);
  const declaredOver = new Request("http://x/", { method: "POST", headers: { "content-length": "999" }, body: "1" });
  await readBodyUpTo(declaredOver, 5);
  expect(bodyReadWhole(declaredOver)).toBe(false);
});

test("under bodyDeadlines a drip below the minimum rate is cut with 408 BODY_READ_TIMEOUT and connection: close once the grace has passed", async () => {
  const enc = new TextEncoder();
  let timer: ReturnType<typeof setInterval> | undefined;
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      timer = setInterval(() => c.enqueue(enc.encode("x")), 10); // ~100 B/s, far under 10 kB/s, never a pause of 200 ms
    },
    cancel() {
      clearInterval(timer);
    },
  });
  const req = new Request("http://x/", { method: "POST", body });
  const t0 = performance.now();
  let err: unknown;
  try {
    await readBodyUpTo(req, 1 << 20, bodyDeadlines(200, 10_000));
  } catch (e) {
    err = e;
  }
  clearInterval(timer);
  expect(err).toBeInstanceOf(LlmgwError);
  expect((err as LlmgwError).code).toBe("BODY_READ_TIMEOUT");
  expect((err as LlmgwError).status).toBe(408);
  expect((err as LlmgwError).headers).toEqual({ connection: "close" });
  expect(performance.now() - t0).toBeGreaterThanOrEqual(190);
  expect(bodyReadWhole(req)).toBe(false);
});
