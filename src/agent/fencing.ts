/**
 * The agent's side of fencing (see FENCING_TOKEN_HEADER): the highest
 * reconciler lease token seen, kept in `<state-dir>/fencing-token` so an agent
 * restart does not forget it, and the check every replica PUT and DELETE
 * passes before it acts. The file is written (then renamed over the old one)
 * before the call proceeds: a token the agent acted on is never forgotten.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { LlmgwError } from "../shared/errors.ts";
import { logger } from "../shared/logger.ts";

export const FENCING_FILE = "fencing-token";

const TOKEN_RE = /^[1-9][0-9]{0,15}$/;

export class FencingGuard {
  #highest = 0;
  readonly #file: string | undefined;

  /** `stateDir`: where the highest token is kept; undefined keeps it in memory only (tests). */
  constructor(stateDir?: string) {
    this.#file = stateDir === undefined ? undefined : join(stateDir, FENCING_FILE);
    if (this.#file === undefined) return;
    try {
      const text = readFileSync(this.#file, "utf8").trim();
      if (TOKEN_RE.test(text)) this.#highest = Number(text);
      else logger().warn({ file: this.#file }, "fencing token file unreadable: starting from 0");
    } catch {
      // No file yet: no leader has called this agent.
    }
  }

  /** The highest token accepted so far (0: none). */
  get highest(): number {
    return this.#highest;
  }

  /**
   * Accept a call carrying `header` (the token as decimal digits), or throw:
   * 409 STALE_FENCING_TOKEN for a token below the highest seen, 400 for one
   * that is not a positive integer. No header: accepted, not fenced.
   */
  check(header: string | null): void {
    if (header === null) return;
    if (!TOKEN_RE.test(header) || !Number.isSafeInteger(Number(header))) {
      throw new LlmgwError("INVALID_REQUEST", "x-llmgw-fencing-token must be a positive integer", { param: "x-llmgw-fencing-token" });
    }
    const token = Number(header);
    if (token < this.#highest) {
      throw new LlmgwError("STALE_FENCING_TOKEN", `fencing token ${token} is stale: this agent has accepted token ${this.#highest} from a newer reconciler`, {
        param: "x-llmgw-fencing-token",
      });
    }
    if (token === this.#highest) return;
    if (this.#file !== undefined) {
      mkdirSync(join(this.#file, ".."), { recursive: true });
      const tmp = `${this.#file}.tmp`;
      writeFileSync(tmp, `${token}\n`);
      renameSync(tmp, this.#file);
    }
    this.#highest = token;
    logger().info({ token }, "new reconciler fencing token");
  }
}
