/** The listener flags both demos take (--listen, --admin-listen, --metrics-listen), and the banner line for the metrics listener. */

/** The demo's listeners from its flags, set on the raw config so they are validated with it and errors name the flag. */
export function applyListenFlags(
  raw: Record<string, unknown>,
  origins: Map<string, string>,
  flags: { listen: string | undefined; adminListen: string | undefined; metricsListen: string | undefined },
): void {
  const set: [string | undefined, string, string][] = [
    [flags.listen, "listen", "--listen"],
    [flags.adminListen, "admin_listen", "--admin-listen"],
    [flags.metricsListen, "metrics_listen", "--metrics-listen"],
  ];
  for (const [value, key, flag] of set) {
    if (!value) continue;
    raw[key] = value;
    origins.set(key, flag);
  }
}

/** The banner's line for the metrics listener, when there is one. */
export function metricsLine(metrics: string | undefined): string {
  return metrics === undefined ? "" : `\n  Metrics        ${metrics}/metrics   (what Prometheus scrapes; deploy/monitoring/prometheus.yml)`;
}
