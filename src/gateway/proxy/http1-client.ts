/**
 * The gateway's HTTP/1.1 client for streams from engines reached over plain
 * http: keep-alive connections per origin over Bun.connect, one exchange at
 * a time on each, the answer's body handed to the relay a burst at a time.
 *
 * Why not fetch: Bun's fetch runs each request through its HTTP client
 * thread, a Response, a ReadableStream and a promise per chunk; this client
 * parses the answer in the socket's own data callback on the main thread and
 * costs the process less CPU per streamed request (docs/benchmarks.md, "The
 * upstream client"). Non-streaming answers and https engines still go
 * through fetch (upstream.ts says why).
 *
 * What it does, as an HTTP/1.1 client must: Content-Length and chunked
 * bodies (extensions and trailers skipped) and bodies delimited by the
 * connection's close; 1xx answers skipped; `Connection: close` and HTTP/1.0
 * honoured; a connection reused only after its answer ended cleanly; one
 * silent retry on a fresh connection when a reused one closes before any
 * byte of its answer (the engine's keep-alive timeout raced our request);
 * idle connections dropped after IDLE_MS; reading paused while more than
 * PAUSE_ABOVE_BYTES wait unread; the request's signal cuts the connection.
 * Header names and values with CR, LF or NUL are refused (no header
 * injection), as fetch refuses them.
 */
import type { Socket } from "bun";
import type { BodyReader, ReadManyResult } from "./body-reader.ts";

/** An engine's answer: status, headers, body. */
export interface UpstreamAnswer {
  readonly status: number;
  /** A header's value (name in lower case), duplicates joined by ", "; null when absent. */
  header(name: string): string | null;
  /** Null when the answer has no body (204, 304, Content-Length: 0). */
  readonly body: BodyReader | null;
}

/** A request to an engine: POST with these headers and body, cut by the signal. */
export interface UpstreamPost {
  headers: Record<string, string>;
  body: Uint8Array | string;
  signal: AbortSignal;
}

/** An answer head larger than this is refused (an engine's headers are a few hundred bytes). */
const MAX_HEAD_BYTES = 64 * 1024;
/** A chunk-size line longer than this is refused. */
const MAX_CHUNK_LINE = 1024;
/** An idle connection older than this is closed rather than reused: under uvicorn's 5 s keep-alive timeout (vLLM's and SGLang's server). */
const IDLE_MS = 4_000;
/** Idle connections kept per origin; more are closed. */
const MAX_IDLE_PER_ORIGIN = 256;
/** Unread body bytes above which the connection's reading pauses until the reader catches up. */
const PAUSE_ABOVE_BYTES = 1 << 20;

/** Where the body's next byte belongs. */
enum Part {
  Head,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailers,
  Length,
  UntilClose,
  Over,
}

const FORBIDDEN_IN_HEADER = /[\r\n\0]/;
const CHUNK_SIZE = /^[0-9a-fA-F]{1,12}$/;
const NO_CHUNKS: Uint8Array[] = [];
const OVER: ReadManyResult = Object.freeze({ done: true, value: NO_CHUNKS }) as ReadManyResult;

class UpstreamHttpError extends Error {
  override name = "UpstreamHttpError";
}

/** One exchange: the answer's head (a promise) and its body (the reader). */
class Exchange implements BodyReader, UpstreamAnswer {
  status = 0;
  body: BodyReader | null = null;
  private headers: Map<string, string> | undefined;
  private queue: Uint8Array[] = [];
  private queued = 0;
  private waiter: { resolve(r: ReadManyResult): void; reject(e: unknown): void } | undefined;
  private error: unknown;
  /** The body ended cleanly. */
  private ended = false;
  /** The exchange is over for its connection (ended, failed or cancelled). */
  settled = false;
  /** Some byte of the answer arrived. */
  answered = false;
  conn: Conn | undefined;
  private headResolve!: (a: UpstreamAnswer) => void;
  private headReject!: (e: unknown) => void;
  readonly head = new Promise<UpstreamAnswer>((resolve, reject) => {
    this.headResolve = resolve;
    this.headReject = reject;
  });
  private readonly onAbort = () => this.abort(this.signal.reason);

  constructor(
    readonly signal: AbortSignal,
    readonly payload: string | Uint8Array,
    /** The payload's length in bytes (a string's in UTF-8). */
    readonly payloadBytes: number,
  ) {
    signal.addEventListener("abort", this.onAbort);
  }

  header(name: string): string | null {
    return this.headers?.get(name) ?? null;
  }

  gotHead(status: number, headers: Map<string, string>, hasBody: boolean): void {
    this.status = status;
    this.headers = headers;
    if (hasBody) this.body = this;
    this.headResolve(this);
  }

  push(chunk: Uint8Array): void {
    this.queue.push(chunk);
    this.queued += chunk.byteLength;
    if (this.queued > PAUSE_ABOVE_BYTES) this.conn?.pause();
  }

  /** After a burst of bytes: the waiting reader gets them. */
  wake(): void {
    const w = this.waiter;
    if (w === undefined) return;
    if (this.queue.length > 0) {
      this.waiter = undefined;
      w.resolve(this.take());
    } else if (this.ended) {
      this.waiter = undefined;
      w.resolve(OVER);
    } else if (this.error !== undefined) {
      this.waiter = undefined;
      w.reject(this.error);
    }
  }

  /** The answer ended cleanly. */
  end(): void {
    this.settle();
    this.ended = true;
    this.wake();
  }

  /** The answer broke: before its head, the head's promise fails; after, the next read does. */
  fail(err: unknown): void {
    if (this.settled) return;
    this.settle();
    this.error = err;
    this.headReject(err);
    this.wake();
  }

  private settle(): void {
    this.settled = true;
    this.signal.removeEventListener("abort", this.onAbort);
  }

  private abort(reason: unknown): void {
    if (this.settled) return;
    const conn = this.conn;
    this.fail(reason ?? new DOMException("The operation was aborted.", "AbortError"));
    conn?.destroy();
  }

  private take(): ReadManyResult {
    const value = this.queue;
    this.queue = [];
    this.queued = 0;
    this.conn?.resume();
    return { done: false, value };
  }

  readMany(): ReadManyResult | Promise<ReadManyResult> {
    if (this.queue.length > 0) return this.take();
    if (this.ended) return OVER;
    if (this.error !== undefined) return Promise.reject(this.error);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  cancel(reason?: unknown): Promise<void> {
    this.queue = [];
    this.queued = 0;
    if (!this.settled) this.abort(reason ?? new UpstreamHttpError("body cancelled"));
    return Promise.resolve();
  }
}

/** One connection to an origin and the parse of the answer on it. */
class Conn {
  socket: Socket<Conn> | undefined;
  ex: Exchange | undefined;
  idleSince = 0;
  closed = false;
  /** Bytes of an unfinished head, chunk-size line or trailer. */
  private partial: Buffer | undefined;
  private part = Part.Over;
  private left = 0;
  private keepAlive = true;
  private paused = false;
  /** The rest of a request the socket's buffer did not take yet. */
  private unsent: Uint8Array | undefined;

  constructor(readonly origin: Origin) {}

  begin(ex: Exchange): void {
    this.ex = ex;
    ex.conn = this;
    this.part = Part.Head;
    this.partial = undefined;
    this.unsent = undefined;
    this.left = 0;
    this.keepAlive = true;
  }

  /** Write the whole payload: what the socket's buffer does not take now goes on each drain. */
  write(payload: string | Uint8Array, total: number): void {
    const socket = this.socket!;
    const wrote = socket.write(payload);
    if (wrote < 0) {
      this.onClose(new UpstreamHttpError("the engine closed the connection before the request was sent"));
      return;
    }
    if (wrote < total) this.unsent = (typeof payload === "string" ? Buffer.from(payload) : payload).subarray(wrote);
  }

  onDrain(): void {
    const rest = this.unsent;
    if (rest === undefined || this.closed) return;
    const wrote = this.socket!.write(rest);
    if (wrote < 0) return; // the close handler reports it
    this.unsent = wrote < rest.byteLength ? rest.subarray(wrote) : undefined;
  }

  pause(): void {
    if (this.paused || this.socket === undefined) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused || this.socket === undefined) return;
    this.paused = false;
    this.socket.resume();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.origin.forget(this);
    this.socket?.terminate();
  }

  onData(data: Buffer): void {
    const ex = this.ex;
    if (ex === undefined || ex.settled) {
      // Bytes on an idle connection, or after a cancelled answer: it cannot be trusted for another.
      this.destroy();
      return;
    }
    ex.answered = true;
    try {
      this.parse(ex, data);
    } catch (err) {
      ex.fail(err);
      this.destroy();
    }
    ex.wake();
  }

  onClose(err?: Error): void {
    this.closed = true;
    this.origin.forget(this);
    const ex = this.ex;
    if (ex === undefined || ex.settled) return;
    if (this.part === Part.UntilClose) {
      this.part = Part.Over;
      ex.end();
      return;
    }
    ex.fail(
      err ??
        new UpstreamHttpError(this.part === Part.Head ? "the engine closed the connection before answering" : "the engine closed the connection mid-answer"),
    );
  }

  private parse(ex: Exchange, data: Buffer): void {
    let buf = data;
    if (this.partial !== undefined) {
      buf = Buffer.concat([this.partial, data]);
      this.partial = undefined;
    }
    let pos = 0;
    const n = buf.length;
    while (pos < n) {
      switch (this.part) {
        case Part.Head: {
          const end = this.until(buf, pos, "\r\n\r\n", MAX_HEAD_BYTES, `the engine's answer head exceeds ${MAX_HEAD_BYTES} bytes`);
          if (end < 0) return;
          this.head(ex, buf.toString("latin1", pos, end));
          pos = end + 4;
          break;
        }
        case Part.ChunkSize: {
          const end = this.until(buf, pos, "\r\n", MAX_CHUNK_LINE, "the engine sent a malformed chunk");
          if (end < 0) return;
          const line = buf.toString("latin1", pos, end);
          const semi = line.indexOf(";");
          const hex = (semi < 0 ? line : line.slice(0, semi)).trim();
          if (!CHUNK_SIZE.test(hex)) throw new UpstreamHttpError("the engine sent a malformed chunk");
          this.left = Number.parseInt(hex, 16);
          pos = end + 2;
          this.part = this.left === 0 ? Part.Trailers : Part.ChunkData;
          break;
        }
        case Part.ChunkData:
        case Part.Length:
        case Part.UntilClose: {
          const take = this.part === Part.UntilClose ? n - pos : Math.min(n - pos, this.left);
          ex.push(pos === 0 && take === n ? buf : buf.subarray(pos, pos + take));
          pos += take;
          if (this.part === Part.UntilClose) break;
          this.left -= take;
          if (this.left === 0) {
            if (this.part === Part.Length) this.finish(ex, n - pos);
            else {
              this.part = Part.ChunkEnd;
              this.left = 2;
            }
          }
          break;
        }
        case Part.ChunkEnd: {
          const take = Math.min(n - pos, this.left);
          for (let i = 0; i < take; i++) if (buf[pos + i] !== (this.left - i === 2 ? 13 : 10)) throw new UpstreamHttpError("the engine sent a malformed chunk");
          pos += take;
          this.left -= take;
          if (this.left === 0) this.part = Part.ChunkSize;
          break;
        }
        case Part.Trailers: {
          const end = this.until(buf, pos, "\r\n", MAX_HEAD_BYTES, "the engine's trailers exceed the head's limit");
          if (end < 0) return;
          const empty = end === pos;
          pos = end + 2;
          if (empty) this.finish(ex, n - pos);
          break;
        }
        case Part.Over:
          // Bytes past the end of the answer: the connection is out of step.
          this.keepAlive = false;
          this.destroy();
          return;
      }
    }
  }

  /**
   * Where `delimiter` starts from `pos`; -1 when it has not arrived yet (the
   * bytes from `pos` are kept for the next read), an error past `limit`
   * bytes without it.
   */
  private until(buf: Buffer, pos: number, delimiter: string, limit: number, tooLong: string): number {
    const end = buf.indexOf(delimiter, pos, "latin1");
    if (end >= 0) return end;
    if (buf.length - pos > limit) throw new UpstreamHttpError(tooLong);
    this.partial = buf.subarray(pos);
    return -1;
  }

  /** The answer's head: status and headers, then how its body is delimited. */
  private head(ex: Exchange, text: string): void {
    const lines = text.split("\r\n");
    const status = /^HTTP\/1\.([01]) (\d{3})/.exec(lines[0]!);
    if (status === null) throw new UpstreamHttpError("the engine's answer is not HTTP/1.x");
    const code = Number(status[2]);
    if (code >= 100 && code < 200) return; // an interim answer: the real head follows
    const headers = new Map<string, string>();
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      const colon = line.indexOf(":");
      if (colon <= 0) throw new UpstreamHttpError("the engine sent a malformed header");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      const had = headers.get(name);
      headers.set(name, had === undefined ? value : `${had}, ${value}`);
    }
    const connection = headers.get("connection")?.toLowerCase() ?? "";
    this.keepAlive = status[1] === "1" ? !connection.includes("close") : connection.includes("keep-alive");
    const coding = headers.get("transfer-encoding")?.toLowerCase();
    const length = headers.get("content-length");
    if (code === 204 || code === 304) this.part = Part.Over;
    else if (coding !== undefined) {
      if (!coding.endsWith("chunked")) throw new UpstreamHttpError(`the engine sent a body in a transfer coding the gateway does not read (${coding})`);
      this.part = Part.ChunkSize;
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) throw new UpstreamHttpError("the engine sent a malformed Content-Length");
      this.left = Number(length);
      this.part = this.left === 0 ? Part.Over : Part.Length;
    } else {
      this.part = Part.UntilClose;
      this.keepAlive = false;
    }
    ex.gotHead(code, headers, this.part !== Part.Over);
    if (this.part === Part.Over) this.finish(ex, 0);
  }

  /** The answer is whole: the exchange ends and the connection goes back to its origin's pool. */
  private finish(ex: Exchange, extraBytes: number): void {
    this.part = Part.Over;
    this.ex = undefined;
    ex.conn = undefined;
    ex.end();
    this.resume();
    if (this.keepAlive && extraBytes === 0) this.origin.release(this);
    else this.destroy();
  }
}

const HANDLERS = {
  data(socket: Socket<Conn>, data: Buffer) {
    socket.data.onData(data);
  },
  close(socket: Socket<Conn>, err?: Error) {
    socket.data.onClose(err);
  },
  error(socket: Socket<Conn>, err: Error) {
    socket.data.onClose(err);
  },
  drain(socket: Socket<Conn>) {
    socket.data.onDrain();
  },
  end(socket: Socket<Conn>) {
    socket.terminate();
  },
};

/** One engine origin: its idle connections, and how to open one. */
class Origin {
  private readonly idle: Conn[] = [];
  /** The Host header. */
  readonly host: string;
  /** The address to connect to (an IPv6 literal without its brackets). */
  private readonly hostname: string;
  private readonly port: number;

  constructor(url: URL) {
    this.host = url.host;
    this.hostname = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === "" ? 80 : Number(url.port);
  }

  /** An idle connection still fresh enough to reuse, or undefined. */
  takeIdle(now: number): Conn | undefined {
    for (;;) {
      const c = this.idle.pop();
      if (c === undefined) return undefined;
      if (!c.closed && now - c.idleSince < IDLE_MS) {
        c.socket?.ref();
        return c;
      }
      c.destroy();
    }
  }

  async connect(): Promise<Conn> {
    const conn = new Conn(this);
    conn.socket = await Bun.connect<Conn>({ hostname: this.hostname, port: this.port, data: conn, socket: HANDLERS });
    conn.socket.setNoDelay(true);
    return conn;
  }

  release(c: Conn): void {
    if (c.closed) return;
    if (this.idle.length >= MAX_IDLE_PER_ORIGIN) {
      c.destroy();
      return;
    }
    c.idleSince = performance.now();
    c.socket?.unref(); // an idle connection does not keep the process alive
    this.idle.push(c);
  }

  forget(c: Conn): void {
    const i = this.idle.lastIndexOf(c);
    if (i >= 0) this.idle.splice(i, 1);
  }

  /** Every idle connection closed. */
  drop(): void {
    for (const c of this.idle.splice(0)) c.destroy();
  }
}

/** A request target: its origin and the path (with query) to send. */
interface Target {
  origin: Origin;
  path: string;
}

/** Distinct request URLs are few (endpoints × API paths); past this many the memo starts over. */
const MAX_TARGETS = 4096;

/** HTTP/1.1 connections to engines, kept alive per origin. */
export class Http1Client {
  private readonly origins = new Map<string, Origin>();
  private readonly targets = new Map<string, Target>();

  /** POST to a plain-http URL; resolves at the answer's head, rejects when the connection fails or the signal fires first. */
  async post(url: string, req: UpstreamPost): Promise<UpstreamAnswer> {
    const { origin, path } = this.target(url);
    const bodyBytes = typeof req.body === "string" ? Buffer.byteLength(req.body) : req.body.byteLength;
    const head = this.requestHead(origin, path, req.headers, bodyBytes);
    const payload = typeof req.body === "string" ? head + req.body : Buffer.concat([Buffer.from(head), req.body]);
    const payloadBytes = Buffer.byteLength(head) + bodyBytes;
    const ex = new Exchange(req.signal, payload, payloadBytes);
    if (req.signal.aborted) {
      ex.fail(req.signal.reason);
      return ex.head;
    }
    let conn = origin.takeIdle(performance.now());
    const reused = conn !== undefined;
    if (conn === undefined) conn = await this.open(origin, ex);
    if (conn === undefined) return ex.head;
    this.send(conn, ex);
    if (!reused) return ex.head;
    try {
      return await ex.head;
    } catch (err) {
      // A reused connection the engine closed before answering (its keep-alive
      // timeout raced this request): once more, on a fresh connection.
      if (ex.answered || req.signal.aborted || !conn.closed) throw err;
      const again = new Exchange(req.signal, payload, payloadBytes);
      const fresh = await this.open(origin, again);
      if (fresh === undefined) return again.head;
      this.send(fresh, again);
      return again.head;
    }
  }

  /** Every idle connection closed (the gateway is stopping, or a test is done). */
  close(): void {
    for (const o of this.origins.values()) o.drop();
    this.origins.clear();
    this.targets.clear();
  }

  private target(url: string): Target {
    let t = this.targets.get(url);
    if (t !== undefined) return t;
    const u = new URL(url);
    if (u.protocol !== "http:") throw new TypeError(`the HTTP/1.1 client reaches http: URLs only, not ${u.protocol}`);
    let origin = this.origins.get(u.host);
    if (origin === undefined) {
      origin = new Origin(u);
      this.origins.set(u.host, origin);
    }
    t = { origin, path: `${u.pathname}${u.search}` };
    if (this.targets.size >= MAX_TARGETS) this.targets.clear();
    this.targets.set(url, t);
    return t;
  }

  private requestHead(origin: Origin, path: string, headers: Record<string, string>, bodyBytes: number): string {
    let head = `POST ${path} HTTP/1.1\r\nhost: ${origin.host}\r\ncontent-length: ${bodyBytes}\r\naccept-encoding: identity\r\n`;
    for (const name in headers) {
      const value = headers[name]!;
      if (FORBIDDEN_IN_HEADER.test(name) || FORBIDDEN_IN_HEADER.test(value) || name.includes(":"))
        throw new TypeError(`upstream header ${JSON.stringify(name)} has a character HTTP does not allow`);
      const lower = name.toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "transfer-encoding" || lower === "connection" || lower === "accept-encoding") continue;
      head += `${name}: ${value}\r\n`;
    }
    return `${head}\r\n`;
  }

  /** A fresh connection for the exchange, or undefined when it failed (the exchange then failed with it). */
  private async open(origin: Origin, ex: Exchange): Promise<Conn | undefined> {
    try {
      const conn = await origin.connect();
      if (ex.settled) {
        conn.destroy(); // the signal fired while connecting
        return undefined;
      }
      return conn;
    } catch (err) {
      ex.fail(err);
      return undefined;
    }
  }

  private send(conn: Conn, ex: Exchange): void {
    conn.begin(ex);
    conn.write(ex.payload, ex.payloadBytes);
  }
}

/** The gateway's one client (its connections live as long as the process). */
export const http1 = new Http1Client();
