/**
 * Label-bound series that cost the request path an addition, not a label set.
 *
 * prom-client's own children (`histogram.labels(...).observe(v)`) still do,
 * on every call, what binding should have done once: copy the labels into a
 * new object, validate them, hash them into a string, look the string up. On
 * the main thread that was most of what a request's ten-odd observations
 * cost. A bound series here finds its prom-client entry once (the object
 * prom-client itself updates and exports) and then adds to it; prom-client
 * still owns the values, the registry and the exposition. It checks on each
 * call that the entry is still the one prom-client holds under its key, so a
 * `reset()` or `remove()` of the metric rebinds instead of writing into a
 * detached object. The entry layout is prom-client's (pinned in
 * package.json); test/unit/bound-series-match-prom-client.test.ts checks the
 * exposition against prom-client's own path, so an upgrade that changes it
 * fails there, not silently.
 */
import type { Counter, Histogram } from "prom-client";

export interface Observer {
  observe(v: number): void;
}

interface Incrementer {
  inc(v?: number): void;
}

type Labels = Record<string, string | number>;

interface HistogramEntry {
  labels: Labels;
  bucketValues: Record<string, number>;
  sum: number;
  count: number;
}

interface CounterEntry {
  labels: Labels;
  value: number;
}

/** What a bound series reads of prom-client's metric objects. */
interface Internals<E> {
  hashMap: Record<string, E>;
  upperBounds?: number[];
}

const internals = <E>(metric: unknown) => metric as Internals<E>;

function sameLabels(a: Labels, b: Labels): boolean {
  const keys = Object.keys(b);
  if (Object.keys(a).length !== keys.length) return false;
  for (const k of keys) if (String(a[k]) !== String(b[k])) return false;
  return true;
}

function findKey<E extends { labels: Labels }>(map: Record<string, E>, labels: Labels): string | undefined {
  for (const key in map) if (sameLabels(map[key]!.labels, labels)) return key;
  return undefined;
}

/** `histogram` with `labels` bound: observe adds to prom-client's entry for them. */
export function boundHistogram<L extends string>(histogram: Histogram<L>, labels: Partial<Record<L, string | number>> = {}): Observer {
  const h = internals<HistogramEntry>(histogram);
  const bounds = h.upperBounds ?? [];
  // prom-client keys each bucket by its bound as a property name: converted once here, not per call.
  const bucketKeys = bounds.map(String);
  let key: string | undefined;
  let entry: HistogramEntry | undefined;
  const bind = (): HistogramEntry => {
    key = findKey(h.hashMap, labels as Labels);
    if (key === undefined) {
      histogram.zero(labels);
      key = findKey(h.hashMap, labels as Labels)!;
    }
    return (entry = h.hashMap[key]!);
  };
  return {
    observe(v: number): void {
      if (!Number.isFinite(v)) return;
      const e = key !== undefined && h.hashMap[key] === entry ? entry! : bind();
      e.sum += v;
      e.count += 1;
      for (let i = 0; i < bounds.length; i++) {
        if (v <= bounds[i]!) {
          e.bucketValues[bucketKeys[i]!]! += 1;
          return;
        }
      }
    },
  };
}

/** `counter` with `labels` bound: inc adds to prom-client's entry for them. */
export function boundCounter<L extends string>(counter: Counter<L>, labels: Partial<Record<L, string | number>> = {}): Incrementer {
  const c = internals<CounterEntry>(counter);
  let key: string | undefined;
  let entry: CounterEntry | undefined;
  const bind = (): CounterEntry => {
    key = findKey(c.hashMap, labels as Labels);
    if (key === undefined) {
      counter.inc(labels, 0);
      key = findKey(c.hashMap, labels as Labels)!;
    }
    return (entry = c.hashMap[key]!);
  };
  return {
    inc(v = 1): void {
      if (!(v >= 0) || !Number.isFinite(v)) return;
      const e = key !== undefined && c.hashMap[key] === entry ? entry! : bind();
      e.value += v;
    },
  };
}
