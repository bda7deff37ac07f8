/**
 * Raw HTTP/1.x over node:net, for what fetch cannot send: requests without a
 * Host, broken request lines and framing, pipelined requests in one write,
 * a declared body that never comes. Answers are split into responses by
 * their Content-Length (these tests read no streamed answers).
 */
import { connect, type Socket } from "node:net";

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface RawExchange {
  responses: RawResponse[];
  /** Everything the server sent, as text. */
  raw: string;
  /** The server closed the connection before `waitMs` ran out (ms after the write; undefined if it stayed open). */
  closedAfterMs: number | undefined;
}

/** Split what a server sent into responses (Content-Length framing; a response without one takes the rest). */
export function parseResponses(raw: string): RawResponse[] {
  const out: RawResponse[] = [];
  let rest = raw;
  while (rest.startsWith("HTTP/")) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const [statusLine, ...lines] = rest.slice(0, end).split("\r\n");
    const headers: Record<string, string> = {};
    for (const l of lines) {
      const i = l.indexOf(":");
      if (i > 0) headers[l.slice(0, i).trim().toLowerCase()] = l.slice(i + 1).trim();
    }
    const length = headers["content-length"] === undefined ? rest.length - end - 4 : Number(headers["content-length"]);
    out.push({ status: Number(statusLine!.split(" ")[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

/** Open a connection to `url`'s host and port. */
export function openSocket(url: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(u.port), u.hostname, () => resolve(s));
    s.once("error", reject);
  });
}

/**
 * Write `payload` on a new connection and collect what comes back until the
 * server closes it, `expect` responses are complete, or `waitMs` passes.
 */
export async function rawExchange(url: string, payload: string | Uint8Array, opts: { waitMs?: number; expect?: number } = {}): Promise<RawExchange> {
  const { waitMs = 3_000, expect } = opts;
  const sock = await openSocket(url);
  const t0 = performance.now();
  let raw = "";
  let closedAfterMs: number | undefined;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, waitMs);
    const finish = () => {
      clearTimeout(timer);
      resolve();
    };
    sock.on("data", (d: Buffer) => {
      raw += d.toString("latin1");
      if (expect !== undefined && parseResponses(raw).length >= expect && completeResponses(raw) >= expect) finish();
    });
    sock.on("close", () => {
      closedAfterMs = performance.now() - t0;
      finish();
    });
    sock.on("error", () => {});
    sock.write(payload);
  });
  sock.destroy();
  return { responses: parseResponses(raw), raw, closedAfterMs };
}

/** How many responses in `raw` have their whole body. */
function completeResponses(raw: string): number {
  let n = 0;
  let rest = raw;
  while (rest.startsWith("HTTP/")) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) break;
    const m = /\r\ncontent-length:\s*(\d+)/i.exec(rest.slice(0, end + 2));
    if (!m) break;
    const total = end + 4 + Number(m[1]);
    if (rest.length < total) break;
    n++;
    rest = rest.slice(total);
  }
  return n;
}

/** Whether `socket` is closed by the server within `ms` (resolves true) or still open after it (false). */
export function closedWithin(socket: Socket, ms: number): Promise<boolean> {
  if (socket.destroyed || socket.readyState === "closed") return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(false), ms);
    socket.once("close", () => {
      clearTimeout(timer);
      resolve(true);
    });
  });
}
