/**
 * Every metric named in src/metrics/names.ts is documented: its name appears
 * in the manual (README.md, docs/*.md) in backticks, alone or with its labels
 * (`llmgw_x{a,b}`), so a metric added without a word on its meaning fails here.
 * Every exported group of definitions is read, so a new group is covered too.
 */
import { expect, test } from "bun:test";
import * as names from "../../src/metrics/names.ts";
import { manualPages, readPage } from "../helpers/docs.ts";

/** The `name` of every `{ name: "llmgw_…", help }` definition in the module's exported objects. */
function metricNames(): string[] {
  const out: string[] = [];
  for (const group of Object.values(names)) {
    if (typeof group !== "object" || group === null || Array.isArray(group)) continue;
    for (const d of Object.values(group)) {
      const name = (d as { name?: unknown } | null)?.name;
      if (typeof name === "string" && name.startsWith("llmgw_")) out.push(name);
    }
  }
  return out;
}

test("the manual names every metric of src/metrics/names.ts", () => {
  const manual = manualPages().map(readPage).join("\n");
  const all = metricNames();
  // The reading of names.ts finds the groups (a sample from three of them).
  expect(all).toEqual(expect.arrayContaining(["llmgw_endpoint_kv_cache_usage_ratio", "llmgw_nodes", "llmgw_kv_events_total"]));
  const undocumented = all.filter((n) => !manual.includes(`\`${n}\``) && !manual.includes(`\`${n}{`));
  expect(undocumented).toEqual([]);
});
