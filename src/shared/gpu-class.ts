/**
 * GPU class from what the driver reports, not the marketing name: the family
 * from the name plus the memory size in whole GiB, rounded to the nearest
 * GiB of `memory.total` (MiB / 1024). An L40S reports 46,068 MiB = 44.99 GiB →
 * `l40s-45g`; an H100 80GB reports 81,559 MiB = 79.65 GiB → `h100-80g`; an
 * H200 reports 143,771 MiB = 140.40 GiB → `h200-140g`. One rule for every
 * card, because the class decides whether a model fits.
 */

/** Words that say nothing about the chip (vendor, product line, memory size or kind). */
const NOISE_WORDS = new Set(["nvidia", "geforce", "tesla", "quadro"]);
const NOISE_PATTERNS = [/^\d+gb$/, /^hbm\d*e?$/, /^gddr\d+x?$/];

/** "NVIDIA H100 80GB HBM3" → "h100"; "NVIDIA GeForce RTX 2080 SUPER" → "rtx-2080-super". */
export function gpuFamily(name: string): string {
  const words = name
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== "" && !NOISE_WORDS.has(w) && !NOISE_PATTERNS.some((p) => p.test(w)));
  return words.length > 0 ? words.join("-") : "unknown";
}

/** Memory in GiB with two decimals, as the scheduler sees it. */
export function memoryGiB(memoryTotalMiB: number): number {
  return Math.round((memoryTotalMiB / 1024) * 100) / 100;
}

/** `<family>-<round(MiB/1024)>g`, or `<family>-unknown` when the driver gave no size. */
export function gpuClass(name: string, memoryTotalMiB: number | undefined): string {
  const family = gpuFamily(name);
  if (memoryTotalMiB === undefined) return `${family}-unknown`;
  return `${family}-${Math.round(memoryTotalMiB / 1024)}g`;
}

/** "8.9" → [8, 9]; undefined for anything else. */
function parseComputeCapability(cc: string | undefined): [number, number] | undefined {
  const m = cc === undefined ? null : /^(\d+)\.(\d+)$/.exec(cc.trim());
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}

/** Whether `cc` is at least `major.minor`; an unknown capability is not (refuse rather than guess). */
export function computeCapabilityAtLeast(cc: string | undefined, major: number, minor: number): boolean {
  const p = parseComputeCapability(cc);
  if (!p) return false;
  return p[0] > major || (p[0] === major && p[1] >= minor);
}
