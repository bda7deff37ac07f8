/** Per-key usage of live API keys as Prometheus counters, with the `key` label bounded: the first KEY_SERIES_CAP key ids seen get their own series, later ones share OTHER_KEY. */
import { Counter, Gauge, type Registry } from "prom-client";
import { KEY_SERIES_CAP, KEYS, OTHER_KEY } from "./names.ts";

export interface KeyMetrics {
  /** One finished request under a live key, with its tokens. */
  used(keyId: string, tokensIn: number, tokensOut: number): void;
}

/** `active`: live keys that authenticate now, read at scrape time. */
export function registerKeyMetrics(registry: Registry, active: () => number, cap = KEY_SERIES_CAP): KeyMetrics {
  const registers = [registry];
  const requests = new Counter({ name: KEYS.requests.name, help: KEYS.requests.help, labelNames: KEYS.requests.labels, registers });
  const tokens = new Counter({ name: KEYS.tokens.name, help: KEYS.tokens.help, labelNames: KEYS.tokens.labels, registers });
  new Gauge({
    name: KEYS.active.name,
    help: KEYS.active.help,
    registers,
    collect() {
      this.set(active());
    },
  });
  const labelled = new Set<string>();
  const labelOf = (id: string): string => {
    if (labelled.has(id)) return id;
    if (labelled.size >= cap) return OTHER_KEY;
    labelled.add(id);
    return id;
  };
  return {
    used(keyId, tokensIn, tokensOut) {
      const key = labelOf(keyId);
      requests.inc({ key });
      if (tokensIn > 0) tokens.inc({ key, direction: "in" }, tokensIn);
      if (tokensOut > 0) tokens.inc({ key, direction: "out" }, tokensOut);
    },
  };
}
