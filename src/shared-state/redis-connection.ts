/**
 * A gateway's one connection to Redis for shared state: Bun's built-in
 * RedisClient (auto-pipelined), Lua scripts sent by EVALSHA (EVAL once when
 * Redis does not know them yet), a per-command timeout, an up/down status the
 * fail-static logic and the metrics read, reconnection of our own, and a count
 * of the commands sent (`llmgw bench cluster` reports commands per request).
 */

import { createHash } from "node:crypto";
import { RedisClient } from "bun";
import { LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";

/** A Lua script, identified in Redis by the SHA1 of its source. */
export class RedisScript {
  readonly sha: string;
  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }
}

interface RedisConnectionOptions {
  commandTimeoutMs: number;
  /** How often to try again while Redis is unreachable. */
  reconnectEveryMs?: number;
  /** Told when Redis becomes reachable (true) or unreachable (false). */
  onStatus?: (up: boolean) => void;
}

const DEFAULT_RECONNECT_EVERY_MS = 500;

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Redis answered with an error reply: a bug or a wrong server, not an outage. */
function isServerError(err: unknown): boolean {
  return typeof err === "object" && err !== null && (err as { code?: unknown }).code === "ERR_REDIS_SERVER_ERROR";
}

export class RedisConnection {
  readonly #client: RedisClient;
  readonly #opts: RedisConnectionOptions;
  readonly #display: string;
  #up = false;
  #downSince: number | undefined = Date.now();
  #lastError: string | undefined;
  #reconnect: ReturnType<typeof setTimeout> | undefined;
  #connecting: Promise<void> | undefined;
  #closed = false;
  /** Commands sent since start (scripts count once). */
  commands = 0;
  /** Commands that failed for want of Redis (unreachable or timed out). */
  failures = 0;

  constructor(url: string, opts: RedisConnectionOptions) {
    this.#opts = opts;
    const u = new URL(url);
    this.#display = `${u.protocol}//${u.host}${u.pathname}`; // no password in logs
    // Our own reconnection and no offline queue: while Redis is away a command fails at once (fail static), not after a queue drains.
    this.#client = new RedisClient(url, { enableOfflineQueue: false, autoReconnect: false, connectionTimeout: Math.max(opts.commandTimeoutMs, 500) });
    this.#client.onclose = (err) => this.#markDown(errorText(err));
    this.#client.onconnect = () => this.#markUp();
  }

  /** Where it connects (without credentials). */
  get target(): string {
    return this.#display;
  }

  get up(): boolean {
    return this.#up;
  }

  /** Since when Redis has been unreachable (undefined while up). */
  get downSince(): number | undefined {
    return this.#downSince;
  }

  get lastError(): string | undefined {
    return this.#lastError;
  }

  /** Connect now; false (and reconnecting in the background) when Redis cannot be reached. */
  async connect(): Promise<boolean> {
    await this.#tryConnect();
    return this.#up;
  }

  #tryConnect(): Promise<void> {
    this.#connecting ??= this.#client
      .connect()
      .then(() => this.#markUp())
      .catch((err: unknown) => this.#markDown(errorText(err)))
      .finally(() => (this.#connecting = undefined));
    return this.#connecting;
  }

  #markUp(): void {
    if (this.#up) return;
    this.#up = true;
    const downMs = this.#downSince === undefined ? 0 : Date.now() - this.#downSince;
    this.#downSince = undefined;
    this.#lastError = undefined;
    logger().info({ redis: this.#display, downMs }, "redis reachable");
    this.#opts.onStatus?.(true);
  }

  #markDown(why: string): void {
    this.#lastError = why;
    if (this.#up) {
      this.#up = false;
      this.#downSince = Date.now();
      logger().warn({ redis: this.#display, err: why }, "redis unreachable: serving from local state (fail static)");
      this.#opts.onStatus?.(false);
    }
    if (this.#closed || this.#reconnect !== undefined) return;
    this.#reconnect = setTimeout(() => {
      this.#reconnect = undefined;
      if (!this.#closed && !this.#up) void this.#tryConnect();
    }, this.#opts.reconnectEveryMs ?? DEFAULT_RECONNECT_EVERY_MS);
  }

  /**
   * One command. Throws STATE_UNAVAILABLE (503) when Redis cannot be reached
   * or does not answer within the command timeout; an error reply from Redis
   * is rethrown as it is (INTERNAL_ERROR upstream: a bug, not an outage).
   */
  async send(command: string, args: string[]): Promise<unknown> {
    return this.#timed(() => this.#client.send(command, args));
  }

  /** A command under the command timeout: a hung Redis (SIGSTOP: connected, silent) fails fast like an unreachable one. */
  async #timed<T>(fn: () => Promise<T>): Promise<T> {
    if (this.#closed) throw new LlmgwError("STATE_UNAVAILABLE", "the shared state store is closed");
    this.commands++;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.#opts.commandTimeoutMs} ms`)), this.#opts.commandTimeoutMs);
    });
    const call = fn();
    try {
      return await Promise.race([call, timeout]);
    } catch (err) {
      if (isServerError(err)) throw err;
      this.failures++;
      const why = errorText(err);
      // A hung server (no answer) must count as down too: drop the connection so the reconnect logic takes over.
      if (why.startsWith("no answer")) this.#markDown(why);
      else if (!this.#client.connected) this.#markDown(why);
      throw new LlmgwError("STATE_UNAVAILABLE", `the shared state store (Redis at ${this.#display}) is unavailable: ${why}`, { retryAfterS: 1, cause: err });
    } finally {
      clearTimeout(timer);
      call.catch(() => {}); // a call that lost the race settles later, unobserved
    }
  }

  /** Run a script atomically: EVALSHA, and EVAL the first time Redis has not seen it (after a restart, too). */
  async eval(script: RedisScript, keys: readonly string[], args: readonly (string | number)[]): Promise<unknown> {
    const tail = [String(keys.length), ...keys, ...args.map(String)];
    try {
      return await this.send("EVALSHA", [script.sha, ...tail]);
    } catch (err) {
      if (!(isServerError(err) && errorText(err).startsWith("NOSCRIPT"))) throw err;
      return await this.send("EVAL", [script.source, ...tail]);
    }
  }

  /** Binary-safe value write (file contents), expiring after `pxMs` when given; under the command timeout. */
  async setBytes(key: string, value: Uint8Array, pxMs?: number): Promise<void> {
    await this.#timed(() => (pxMs === undefined ? this.#client.set(key, value) : this.#client.set(key, value, "PX", pxMs)));
  }

  /** Binary-safe value read, under the command timeout. */
  async getBytes(key: string): Promise<Uint8Array | undefined> {
    const v = await this.#timed(() => this.#client.getBuffer(key));
    return v === null ? undefined : new Uint8Array(v);
  }

  close(): void {
    this.#closed = true;
    clearTimeout(this.#reconnect);
    this.#client.onclose = null;
    this.#client.close();
  }
}
