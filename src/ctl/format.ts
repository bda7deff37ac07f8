/** How `llmgw ctl` writes ages and absent values in its tables. */

/** "3.2 s ago", "-" when never. */
export function age(ms: number | null): string {
  if (ms === null) return "-";
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s ago` : `${Math.round(ms / 1000)} s ago`;
}

export function dash(v: string | number | null | undefined): string {
  return v === null || v === undefined || v === "" ? "-" : String(v);
}
