/**
 * The gateway's HTTP/1.1 client against raw loopback servers that answer
 * byte by byte, reuse or drop connections, lie about framing and stall.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import type { BodyReader } from "../../src/gateway/proxy/body-reader.ts";
import { Http1Client } from "../../src/gateway/proxy/http1-client.ts";

interface Seen {
  /** Every request's bytes, in arrival order, per connection. */
  requests: string[];
  connections: number;
  closed: number;
}

type Answer = (req: string, socket: Socket<{ buf: string; n: number }>, nth: number) => void | Promise<void>;

const servers: TCPSocketListener<{ buf: string; n: number }>[] = [];
const client = new Http1Client();

/** A server that calls `answer` once per whole request (head and Content-Length body) it reads. */
function server(answer: Answer): { url: string; seen: Seen } {
  const seen: Seen = { requests: [], connections: 0, closed: 0 };
  const s = Bun.listen<{ buf: string; n: number }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(sock) {
        sock.data = { buf: "", n: 0 };
        seen.connections++;
      },
      data(sock, data) {
        sock.data.buf += data.toString("latin1");
        for (;;) {
          const end = sock.data.buf.indexOf("\r\n\r\n");
          if (end < 0) return;
          const length = Number(/content-length: (\d+)/i.exec(sock.data.buf.slice(0, end))?.[1] ?? 0);
          if (sock.data.buf.length < end + 4 + length) return;
          const req = sock.data.buf.slice(0, end + 4 + length);
          sock.data.buf = sock.data.buf.slice(end + 4 + length);
          seen.requests.push(req);
          void answer(req, sock, sock.data.n++);
        }
      },
      close() {
        seen.closed++;
      },
    },
  });
  servers.push(s);
  return { url: `http://127.0.0.1:${s.port}`, seen };
}

async function readAll(reader: BodyReader | null): Promise<string> {
  if (reader === null) return "";
  const chunks: Uint8Array[] = [];
  for (;;) {
    const got = reader.readMany();
    const r = got instanceof Promise ? await got : got;
    chunks.push(...r.value);
    if (r.done) return Buffer.concat(chunks).toString();
  }
}

function post(url: string, body = '{"q":1}', headers: Record<string, string> = { "content-type": "application/json" }, signal = new AbortController().signal) {
  return client.post(`${url}/v1/chat/completions`, { headers, body, signal });
}

/** Write `text` one byte per write, each in its own turn of the loop. */
async function byteByByte(sock: Socket<unknown>, text: string): Promise<void> {
  for (const ch of text) {
    sock.write(ch);
    await Bun.sleep(0);
  }
}

const CHUNKED =
  "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n7;ext=1\r\ndata: a\r\n8\r\ndata: bc\r\n0\r\nx-trailer: 1\r\n\r\n";

afterEach(() => client.close());
afterAll(() => {
  for (const s of servers) s.stop(true);
});

describe("framing", () => {
  test("a chunked answer sent one byte at a time arrives whole (extensions and trailers skipped), and the connection is reused", async () => {
    const { url, seen } = server((_req, sock) => byteByByte(sock, CHUNKED));
    for (let i = 0; i < 3; i++) {
      const a = await post(url);
      expect(a.status).toBe(200);
      expect(a.header("content-type")).toBe("text/event-stream");
      expect(await readAll(a.body)).toBe("data: adata: bc");
    }
    expect(seen.connections).toBe(1);
  });

  test("the request carries its headers, Host, Content-Length in bytes and the body as sent", async () => {
    const { url, seen } = server((_req, sock) => void sock.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
    const body = JSON.stringify({ q: "héllo ✓" });
    const a = await post(url, body, { "content-type": "application/json", "x-request-id": "r-1" });
    expect(await readAll(a.body)).toBe("ok");
    const req = seen.requests[0]!;
    expect(req.startsWith("POST /v1/chat/completions HTTP/1.1\r\n")).toBe(true);
    expect(req).toContain(`host: ${new URL(url).host}\r\n`);
    expect(req).toContain(`content-length: ${Buffer.byteLength(body)}\r\n`);
    expect(req).toContain("x-request-id: r-1\r\n");
    expect(Buffer.from(req.slice(req.indexOf("\r\n\r\n") + 4), "latin1").toString()).toBe(body);
  });

  test("Content-Length, 204 and an answer delimited by its close each end where HTTP says; only the last costs the connection", async () => {
    const { url, seen } = server((_req, sock, nth) => {
      if (nth === 0) sock.write("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello");
      else if (nth === 1) sock.write("HTTP/1.1 204 No Content\r\n\r\n");
      else {
        sock.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"until":');
        setTimeout(() => sock.end('"close"}'), 20);
      }
    });
    expect(await readAll((await post(url)).body)).toBe("hello");
    const empty = await post(url);
    expect(empty.status).toBe(204);
    expect(empty.body).toBeNull();
    expect(await readAll((await post(url)).body)).toBe('{"until":"close"}');
    expect(seen.connections).toBe(1);
    expect(await readAll((await post(url)).body)).toBe("hello");
    expect(seen.connections).toBe(2);
  });

  test("an interim 100 Continue is skipped; Connection: close is honoured", async () => {
    const { url, seen } = server((_req, sock) => {
      sock.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok");
    });
    expect(await readAll((await post(url)).body)).toBe("ok");
    expect(await readAll((await post(url)).body)).toBe("ok");
    expect(seen.connections).toBe(2);
  });

  test("an 8 MiB request goes out whole past the socket's buffer", async () => {
    const { url, seen } = server((_req, sock) => void sock.write("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
    const big = JSON.stringify({ prompt: "x".repeat(8 << 20) });
    const a = await post(url, big);
    expect(a.status).toBe(200);
    expect(seen.requests[0]!.length - seen.requests[0]!.indexOf("\r\n\r\n") - 4).toBe(big.length);
  });

  test("a 24 MiB answer read slowly arrives intact (reading pauses while the reader lags)", async () => {
    const part = Buffer.alloc(1 << 20);
    for (let i = 0; i < part.length; i++) part[i] = 97 + (i % 26);
    const whole = Buffer.concat(Array.from({ length: 24 }, () => part));
    const http = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(whole) });
    try {
      const a = await post(`http://127.0.0.1:${http.port}`);
      expect(a.header("content-length")).toBe(String(whole.length));
      const chunks: Uint8Array[] = [];
      for (;;) {
        const got = a.body!.readMany();
        const r = got instanceof Promise ? await got : got;
        chunks.push(...r.value);
        if (r.done) break;
        await Bun.sleep(5);
      }
      expect(Buffer.concat(chunks).equals(whole)).toBe(true);
    } finally {
      http.stop(true);
    }
  }, 30_000);
});

describe("what breaks", () => {
  test("a reused connection the engine closes before answering is retried once on a fresh one", async () => {
    const { url, seen } = server((_req, sock, nth) => {
      if (nth === 0) sock.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
      else sock.end(); // the keep-alive timeout raced the second request
    });
    expect(await readAll((await post(url)).body)).toBe("ok");
    expect(await readAll((await post(url)).body)).toBe("ok");
    expect(seen.connections).toBe(2);
    expect(seen.requests.length).toBe(3);
  });

  test("a fresh connection closed before an answer is not retried: the post rejects", async () => {
    const { url, seen } = server((_req, sock) => void sock.end());
    await expect(post(url)).rejects.toThrow(/closed the connection before answering/);
    expect(seen.requests.length).toBe(1);
  });

  test("a connection cut mid-body fails the next read, not the answer's head", async () => {
    const { url } = server((_req, sock) => {
      sock.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: a\r\n");
      setTimeout(() => sock.end(), 20);
    });
    const a = await post(url);
    await expect(readAll(a.body)).rejects.toThrow(/mid-answer/);
  });

  test("the signal cuts a stalled answer: the read rejects with its reason and the connection is closed", async () => {
    const { url, seen } = server((_req, sock) => void sock.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: a\r\n"));
    const ac = new AbortController();
    const a = await post(url, "{}", {}, ac.signal);
    const first = await a.body!.readMany();
    expect(Buffer.concat(first.value).toString()).toBe("data: a");
    setTimeout(() => ac.abort(new Error("idle deadline")), 20);
    await expect(readAll(a.body)).rejects.toThrow("idle deadline");
    for (let i = 0; i < 100 && seen.closed === 0; i++) await Bun.sleep(10);
    expect(seen.closed).toBe(1);
  });

  test("a signal fired before the head rejects the post", async () => {
    const { url } = server(() => {});
    const ac = new AbortController();
    setTimeout(() => ac.abort(new Error("headers deadline")), 20);
    await expect(post(url, "{}", {}, ac.signal)).rejects.toThrow("headers deadline");
  });

  test("cancelling a body closes its connection; the next post opens another", async () => {
    const { url, seen } = server((_req, sock) => void sock.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n7\r\ndata: a\r\n"));
    const a = await post(url);
    await a.body!.cancel();
    await post(url);
    expect(seen.connections).toBe(2);
  });

  test.each([
    ["a head that is not HTTP", "SSH-2.0-OpenSSH\r\n\r\n", /not HTTP/],
    ["a malformed chunk size", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", /malformed chunk/],
    ["a chunk without its CRLF", "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nokXY", /malformed chunk/],
    ["a malformed Content-Length", "HTTP/1.1 200 OK\r\ncontent-length: 1e3\r\n\r\n", /Content-Length/],
    ["a gzip transfer coding", "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n", /transfer coding/],
  ])(
    "%s is refused with a clear error",
    async (_what, raw, message) => {
      const { url } = server((_req, sock) => void sock.write(raw));
      await expect(post(url).then((a) => readAll(a.body))).rejects.toThrow(message);
    },
    10_000,
  );

  test("a head past 64 KiB is refused", async () => {
    const { url } = server((_req, sock) => void sock.write(`HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(70_000)}`));
    await expect(post(url)).rejects.toThrow(/head exceeds/);
  });

  test("a header value with CR or LF is refused before anything is sent", async () => {
    const { url, seen } = server(() => {});
    await expect(post(url, "{}", { "x-evil": "a\r\nx-injected: 1" })).rejects.toThrow(TypeError);
    expect(seen.connections).toBe(0);
  });

  test("a refused connection rejects the post", async () => {
    const { url } = server(() => {});
    servers.pop()!.stop(true);
    await expect(post(url)).rejects.toThrow();
  });
});
