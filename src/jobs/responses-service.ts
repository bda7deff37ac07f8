/**
 * The Responses API's state inside `llmgw serve`: the store of responses
 * (bun:sqlite in data_dir, responses.sqlite, opened on first use — or at
 * start when a previous run left one, so its background responses resume —
 * or the store shared through Redis) and the background runner over it.
 */
import type { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Config } from "../config/types.ts";
import { LlmgwError } from "../shared/errors.ts";
import type { Logger } from "../shared/logger.ts";
import { BackgroundResponses, type BackgroundSend } from "./background-responses.ts";
import { type ResponsesStore, SqliteResponsesStore } from "./responses-store.ts";
import { openStateDatabase } from "./state-db.ts";

const RESPONSES_DB_FILE = "responses.sqlite";

/**
 * After a store write found the disk full, requests asking to be stored are
 * refused (507, before any engine runs) this long, then tried again: an
 * answer generated and then dropped would charge tokens for nothing.
 */
const STORAGE_FULL_HOLD_MS = 30_000;

/** Expired records are deleted at most this often, piggybacked on stores (no timer to own). */
const PURGE_EVERY_MS = 60_000;
/** How often an embedded runner looks for lapsed leases and ended backoffs (a new background response wakes it at once). */
const EMBEDDED_TICK_MS = 1_000;
/**
 * How often a runner on the shared store looks for work it was not woken
 * for: another gateway's lapsed leases (30 s) — a claim is a Redis command,
 * so not every second on every gateway. A background response is created
 * and woken on its own gateway; a backoff wakes its runner itself.
 */
const SHARED_TICK_MS = 10_000;

interface OpenResponses {
  store: ResponsesStore;
  background: BackgroundResponses;
}

interface GatewayResponsesDeps {
  config: Config;
  log: Logger;
  /** Runs one background response through the request path (serve/background-send.ts). */
  send: BackgroundSend;
  /** The store shared by several gateways (state.backend: redis); absent, the embedded one. */
  shared?: ResponsesStore;
}

export class GatewayResponses {
  readonly #deps: GatewayResponsesDeps;
  #opening: Promise<OpenResponses> | undefined;
  #open: (OpenResponses & { db: Database | undefined }) | undefined;
  #stopped = false;
  #lastPurgeMs = 0;
  #fullUntilMs = 0;

  constructor(deps: GatewayResponsesDeps) {
    this.#deps = deps;
  }

  /** At start: a store a previous run left (or the shared one) is opened now, so its background responses resume. */
  async resume(): Promise<boolean> {
    if (this.#deps.shared === undefined && !existsSync(join(this.#deps.config.dataDir, RESPONSES_DB_FILE))) return false;
    await this.opened();
    return true;
  }

  opened(): Promise<OpenResponses> {
    if (this.#stopped) return Promise.reject(new LlmgwError("NO_READY_ENDPOINT", "the gateway is shutting down"));
    this.#opening ??= this.#openNow().catch((err: unknown) => {
      this.#opening = undefined;
      throw err;
    });
    return this.#opening;
  }

  /** A store write found no room: requests to store are refused for a while. */
  noteStorageFull(nowMs = Date.now()): void {
    this.#fullUntilMs = nowMs + STORAGE_FULL_HOLD_MS;
  }

  /** A store write succeeded: there is room again. */
  noteStored(): void {
    this.#fullUntilMs = 0;
  }

  /** Seconds until a request asking to be stored is tried again, while a recent write found the disk full; undefined otherwise. */
  storageFullForS(nowMs = Date.now()): number | undefined {
    return nowMs < this.#fullUntilMs ? Math.ceil((this.#fullUntilMs - nowMs) / 1000) : undefined;
  }

  /** Drop expired records now and then (called as responses are stored). */
  purgeNowAndThen(store: ResponsesStore): void {
    const now = Date.now();
    if (now - this.#lastPurgeMs < PURGE_EVERY_MS) return;
    this.#lastPurgeMs = now;
    void store.purgeExpired(now).catch(() => {});
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#open === undefined) await this.#opening?.catch(() => undefined);
    await this.#open?.background.stop();
  }

  close(): void {
    this.#open?.db?.close();
    this.#open = undefined;
  }

  async #openNow(): Promise<OpenResponses> {
    const { config, log, shared, send } = this.#deps;
    let db: Database | undefined;
    if (shared === undefined) {
      try {
        db = openStateDatabase(config.dataDir, { file: RESPONSES_DB_FILE });
      } catch (err) {
        log.error({ err: err instanceof Error ? err.message : String(err), dataDir: resolve(config.dataDir) }, "cannot open the responses store");
        throw new LlmgwError("INTERNAL_ERROR", `the responses store cannot be opened in data_dir (${resolve(config.dataDir)}); see the gateway's log`);
      }
    }
    const store = shared ?? new SqliteResponsesStore(db!);
    const background = new BackgroundResponses({
      store,
      send,
      concurrency: config.responses.backgroundConcurrency,
      tickMs: shared === undefined ? EMBEDDED_TICK_MS : SHARED_TICK_MS,
    });
    background.start();
    this.#open = { store, background, db };
    log.info({ store: shared === undefined ? resolve(config.dataDir, RESPONSES_DB_FILE) : "shared (redis)" }, "responses store opened");
    return this.#open;
  }
}
