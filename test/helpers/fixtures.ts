/** The real captures (nvidia-smi, DCGM, vLLM, SGLang, sysfs) copied from shared/fixtures; origins in SOURCES.md beside them. */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export const SHARED_FIXTURES = join(import.meta.dir, "..", "fixtures", "shared");

export function sharedFixture(name: string): string {
  return readFileSync(join(SHARED_FIXTURES, name), "utf8");
}
