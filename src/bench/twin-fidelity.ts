/**
 * What every `--check` of a bench holds the fleet twin to: each figure's
 * error against the real-time run of the same workload, within a common
 * tolerance.
 */

/** The twin's figures within this fraction of the real-time run's: the fidelity the twin is held to. */
export const TWIN_TOLERANCE = 0.1;

export interface FigureCheck {
  real: number;
  twin: number;
  /** (twin − real) ÷ real; NaN when real is 0 or either is missing. */
  error: number;
}

export function figureCheck(real: number, twin: number): FigureCheck {
  return { real, twin, error: Number.isFinite(real) && Number.isFinite(twin) && real !== 0 ? (twin - real) / real : NaN };
}

/** Within the tolerance (a missing figure is not). */
export function withinTolerance(f: FigureCheck, tolerance: number): boolean {
  return Math.abs(f.error) <= tolerance;
}

/** An error as a signed percentage ("—" when there is none). */
export function errorText(e: number): string {
  return Number.isFinite(e) ? `${e >= 0 ? "+" : ""}${(e * 100).toFixed(1)} %` : "—";
}
