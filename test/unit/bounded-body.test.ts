/** Reading a body under a byte limit: declared lengths, streamed bodies without one, and the exact limit. */
import { expect, test } from "bun:test";
import { readBodyUpTo } from "../../src/shared/bounded-body.ts";

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
