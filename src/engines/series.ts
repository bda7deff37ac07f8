/** Combining the series of one engine metric into one number: summing distinct queues, collapsing replicated ranks, ignoring NaN. */
import type { Sample } from "./prom-text.ts";

/** Finite samples of `name` (NaN and ±Inf are treated as "not reported"). */
export function finiteSamples(samples: readonly Sample[], name: string): Sample[] {
  return samples.filter((s) => s.name === name && Number.isFinite(s.value));
}

/** The first name in `names` that has at least one finite sample, or undefined. */
export function firstPresent(samples: readonly Sample[], names: readonly string[]): string | undefined {
  return names.find((n) => samples.some((s) => s.name === n && Number.isFinite(s.value)));
}

/**
 * Group key of a series with the `ignore` labels left out. Series that differ
 * only in an ignored label (e.g. SGLang `tp_rank`) describe the same scheduler
 * and are collapsed instead of added.
 */
function groupKey(labels: Readonly<Record<string, string>>, ignore: ReadonlySet<string>): string {
  return Object.keys(labels)
    .filter((k) => !ignore.has(k))
    .sort()
    .map((k) => `${k}=${labels[k]}`)
    .join("\u0000");
}

/**
 * Sum across distinct series, after collapsing series that differ only in the
 * `replicated` labels with max (each tensor-parallel rank reports the same
 * queue, so adding them would multiply-count). Undefined when nothing finite.
 */
export function sumAcrossSeries(samples: readonly Sample[], name: string, replicated: ReadonlySet<string> = new Set()): number | undefined {
  const values = distinctSeries(samples, name, replicated);
  if (values.length === 0) return undefined;
  let total = 0;
  for (const v of values) total += v;
  return total;
}

/** One value per distinct series of `name`, series differing only in `replicated` labels collapsed with max. */
function distinctSeries(samples: readonly Sample[], name: string, replicated: ReadonlySet<string>): number[] {
  const groups = new Map<string, number>();
  for (const s of finiteSamples(samples, name)) {
    const key = groupKey(s.labels, replicated);
    const prev = groups.get(key);
    groups.set(key, prev === undefined ? s.value : Math.max(prev, s.value));
  }
  return [...groups.values()];
}

/** Max over every finite series of `name`; undefined when none. */
export function maxAcrossSeries(samples: readonly Sample[], name: string): number | undefined {
  let max: number | undefined;
  for (const s of finiteSamples(samples, name)) max = max === undefined ? s.value : Math.max(max, s.value);
  return max;
}

/** Mean over distinct series (replicated ranks collapsed with max first); undefined when none. */
export function meanAcrossSeries(samples: readonly Sample[], name: string, replicated: ReadonlySet<string> = new Set()): number | undefined {
  const values = distinctSeries(samples, name, replicated);
  if (values.length === 0) return undefined;
  let total = 0;
  for (const v of values) total += v;
  return total / values.length;
}

/** Clamp a ratio into [0,1]; undefined stays undefined. */
export function clampUnit(v: number | undefined): number | undefined {
  if (v === undefined || !Number.isFinite(v)) return undefined;
  return Math.min(1, Math.max(0, v));
}
