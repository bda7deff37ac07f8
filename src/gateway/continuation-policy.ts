/**
 * Which streams may be continued on another replica, and where:
 * the config's switches — globally, per model, per endpoint — and what the
 * gateway learned at run time: an endpoint that answered a chat continuation
 * with a 400 cannot take a prefill, and is never a target for that model
 * again. What was learned is kept in a small file in data_dir, so a restart
 * does not lose one more stream to each such endpoint to learn it again.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import type { Config, ContinuationConfig } from "../config/types.ts";
import type { Logger } from "../shared/logger.ts";

/** The file, in data_dir, that keeps the learned refusals across restarts. */
export const REFUSALS_FILE = "continuation-refusals.json";

/** The refusals file of a configuration: in its data_dir, read against its endpoints' URLs. */
export function refusalsFileOf(config: Pick<Config, "dataDir" | "endpoints">, log: Pick<Logger, "warn">): RefusalsFile {
  return { path: join(config.dataDir, REFUSALS_FILE), log, urls: new Map(config.endpoints.map((e) => [e.id, e.url])) };
}

/**
 * Where learned refusals are kept: the file's path, where to say it could not
 * be read or written, and the URL each configured endpoint has now. A refusal
 * is kept with the endpoint's URL and read back only while the endpoint of
 * that id still has it: another engine under the same id is asked again.
 */
interface RefusalsFile {
  readonly path: string;
  readonly log: Pick<Logger, "warn">;
  readonly urls: ReadonlyMap<string, string>;
}

/** Learned refusals kept at most (endpoint ids of fleet replicas come and go; the oldest are forgotten first). */
const MAX_LEARNED = 4096;

export class ContinuationPolicy {
  private readonly offModels: ReadonlySet<string>;
  private readonly offEndpoints: ReadonlySet<string>;
  /** `${endpointId}\0${model}` of endpoints that refused a continuation of that model. */
  private readonly refused = new Set<string>();
  /** The URL each refusal was learned at (what the file keeps beside it). */
  private readonly learnedAt = new Map<string, string>();

  constructor(
    readonly config: ContinuationConfig,
    private readonly file?: RefusalsFile,
  ) {
    this.offModels = new Set(config.offModels);
    this.offEndpoints = new Set(config.offEndpoints);
    if (file) this.load(file);
  }

  get enabled(): boolean {
    return this.config.enabled;
  }

  get maxRecoveries(): number {
    return this.config.maxRecoveries;
  }

  /** Whether streams of `model` may be continued (and `model` may take a continuation). */
  modelOn(model: string): boolean {
    return this.config.enabled && !this.offModels.has(model);
  }

  /** Whether endpoint `id` may take a continuation of `model`. */
  target(id: string, model: string): boolean {
    return !this.offEndpoints.has(id) && !this.refused.has(`${id}\u0000${model}`);
  }

  /** Endpoint `id` (at `url`) rejected a continuation of `model`: never a target for it again. True when this is news. */
  learnRefusal(id: string, model: string, url?: string): boolean {
    const key = `${id}\u0000${model}`;
    if (this.refused.has(key)) return false;
    if (this.refused.size >= MAX_LEARNED) {
      const oldest = this.refused.values().next().value!;
      this.refused.delete(oldest);
      this.learnedAt.delete(oldest);
    }
    this.refused.add(key);
    if (url !== undefined) this.learnedAt.set(key, url);
    if (this.file) this.save(this.file);
    return true;
  }

  /** [endpoint id, model, url] triples whose endpoint still has that URL, at most MAX_LEARNED; anything else in the file is skipped (a missing file is the usual first start). */
  private load(file: RefusalsFile): void {
    let text: string;
    try {
      text = readFileSync(file.path, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT")
        file.log.warn({ err: (err as Error).message, path: file.path }, "cannot read learned continuation refusals");
      return;
    }
    let pairs: unknown;
    try {
      pairs = JSON.parse(text);
    } catch {
      file.log.warn({ path: file.path }, "learned continuation refusals are not JSON: starting without them");
      return;
    }
    if (!Array.isArray(pairs)) return;
    for (const p of pairs.slice(-MAX_LEARNED)) {
      if (!Array.isArray(p) || p.length !== 3 || !p.every((s) => typeof s === "string")) continue;
      const [id, model, url] = p as [string, string, string];
      if (file.urls.get(id) !== url) continue;
      const key = `${id}\u0000${model}`;
      this.refused.add(key);
      this.learnedAt.set(key, url);
    }
  }

  /** Written whole through a temporary file and a rename: a crash mid-write leaves the previous file. Refusals are rare; the file is small. */
  private save(file: RefusalsFile): void {
    // Only refusals learned at a known URL are kept: without one, a restart could not tell the same engine from another.
    const pairs = [...this.learnedAt].map(([k, url]) => [...k.split("\u0000"), url]);
    try {
      mkdirSync(dirname(file.path), { recursive: true });
      writeFileSync(`${file.path}.tmp`, JSON.stringify(pairs));
      renameSync(`${file.path}.tmp`, file.path);
    } catch (err) {
      file.log.warn({ err: (err as Error).message, path: file.path }, "cannot keep learned continuation refusals (kept in memory only)");
    }
  }
}
