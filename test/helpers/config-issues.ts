/** The key-path issues of a config that must fail to load. */
import { ConfigError } from "../../src/config/load.ts";

export function issuesOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    if (err instanceof ConfigError) return [...err.issues];
    throw err;
  }
  throw new Error("expected a ConfigError");
}
