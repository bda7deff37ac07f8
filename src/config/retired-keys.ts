/** Top-level config keys that no longer do anything: accepted with a warning, so a config written for an older release still starts the gateway. */

/** Each retired key and what took its place (said in the warning). */
const RETIRED_KEYS: Readonly<Record<string, string>> = {
  relay_variant: "the SSE relay has one transport, Bun's direct stream",
};

/**
 * Removes the retired keys from `raw` (in place, before validation: the
 * strict schema no longer knows them) and returns one warning for each that
 * was set. (An LLMGW_* variable for one is ignored like any variable that
 * names no config key.)
 */
export function dropRetiredKeys(raw: Record<string, unknown>): string[] {
  const warnings: string[] = [];
  for (const [key, instead] of Object.entries(RETIRED_KEYS)) {
    if (!Object.hasOwn(raw, key)) continue;
    delete raw[key];
    warnings.push(`${key}: removed, its value is ignored (${instead}); delete it from the configuration`);
  }
  return warnings;
}
