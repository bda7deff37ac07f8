/** Pure parsing of `nvidia-smi --query-gpu=… --format=csv,noheader,nounits` output and its errors. */

/**
 * The fields the agent queries, in order. Required ones first; the optional
 * ones go last because a driver that does not know one field fails the whole
 * query (exit 2, `Field "…" is not a valid field to query.`), and the agent
 * then retries without it. `utilization.gpu` is the last one: on a MIG GPU it
 * reads `[N/A]`, and it is the field most likely to be missing on old drivers.
 */
export const REQUIRED_GPU_FIELDS = [
  "index",
  "uuid",
  "name",
  "memory.total",
  "memory.used",
  "compute_cap",
  "ecc.errors.uncorrected.volatile.total",
  "ecc.errors.corrected.volatile.total",
] as const;

export const OPTIONAL_GPU_FIELDS = ["mig.mode.current", "utilization.gpu"] as const;

type GpuField = (typeof REQUIRED_GPU_FIELDS)[number] | (typeof OPTIONAL_GPU_FIELDS)[number];

/** One GPU as the driver reports it. Absent values (`[N/A]`, `N/A`, `[Not Supported]`…) are undefined, never 0. */
export interface GpuRecord {
  index: number;
  uuid: string;
  name: string;
  memoryTotalMiB: number | undefined;
  memoryUsedMiB: number | undefined;
  /** e.g. "9.0"; undefined when the driver does not report it. */
  computeCapability: string | undefined;
  eccUncorrectedVolatile: number | undefined;
  eccCorrectedVolatile: number | undefined;
  /** undefined when not queried or not applicable (consumer cards). */
  migEnabled: boolean | undefined;
  /** Percent; undefined on MIG GPUs, on drivers that lack the field, or when not reported. */
  utilizationPct: number | undefined;
}

/**
 * A value nvidia-smi prints for "nothing": `[N/A]`, bare `N/A` (fabric
 * fields), `[Not Supported]`, `[Unknown Error]`, `[Requested functionality has
 * been deprecated]`, or an empty cell.
 */
function isAbsent(raw: string): boolean {
  const v = raw.trim();
  return v === "" || v === "N/A" || /^\[.*\]$/.test(v);
}

/** A number, or undefined for an absent or non-numeric value (never 0 by accident). */
function parseNumber(raw: string | undefined): number | undefined {
  if (raw === undefined || isAbsent(raw)) return undefined;
  const n = Number(raw.trim());
  return Number.isFinite(n) ? n : undefined;
}

function parseText(raw: string | undefined): string | undefined {
  if (raw === undefined || isAbsent(raw)) return undefined;
  return raw.trim();
}

function parseEnabled(raw: string | undefined): boolean | undefined {
  const v = parseText(raw);
  if (v === "Enabled") return true;
  if (v === "Disabled") return false;
  return undefined;
}

/** Split one CSV row into exactly `count` cells; surplus commas are assumed to sit in `name`, the only free-text field. */
function splitRow(line: string, fields: readonly string[]): string[] | undefined {
  const cells = line.split(",").map((c) => c.trim());
  if (cells.length < fields.length) return undefined;
  const extra = cells.length - fields.length;
  if (extra === 0) return cells;
  const nameAt = fields.indexOf("name");
  if (nameAt < 0) return undefined;
  const merged = cells.slice(nameAt, nameAt + extra + 1).join(", ");
  return [...cells.slice(0, nameAt), merged, ...cells.slice(nameAt + extra + 1)];
}

interface ParsedGpuCsv {
  gpus: GpuRecord[];
  /** Rows that could not be read (wrong cell count, no index/uuid); never thrown: one odd row must not hide the others. */
  malformed: string[];
}

/** Parse `--format=csv,noheader,nounits` output produced with `fields` (in that order). */
export function parseGpuCsv(text: string, fields: readonly string[]): ParsedGpuCsv {
  const gpus: GpuRecord[] = [];
  const malformed: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "") continue;
    const cells = splitRow(line, fields);
    if (!cells) {
      malformed.push(line);
      continue;
    }
    const get = (f: GpuField): string | undefined => {
      const i = fields.indexOf(f);
      return i < 0 ? undefined : cells[i];
    };
    const index = parseNumber(get("index"));
    const uuid = parseText(get("uuid"));
    if (index === undefined || !Number.isInteger(index) || uuid === undefined) {
      malformed.push(line);
      continue;
    }
    gpus.push({
      index,
      uuid,
      name: parseText(get("name")) ?? "unknown",
      memoryTotalMiB: parseNumber(get("memory.total")),
      memoryUsedMiB: parseNumber(get("memory.used")),
      computeCapability: parseText(get("compute_cap")),
      eccUncorrectedVolatile: parseNumber(get("ecc.errors.uncorrected.volatile.total")),
      eccCorrectedVolatile: parseNumber(get("ecc.errors.corrected.volatile.total")),
      migEnabled: parseEnabled(get("mig.mode.current")),
      utilizationPct: parseNumber(get("utilization.gpu")),
    });
  }
  return { gpus, malformed };
}

/** The fields named in `Field "x" is not a valid field to query.` messages (older drivers). */
export function rejectedFields(output: string): string[] {
  const out: string[] = [];
  for (const m of output.matchAll(/Field "([^"]+)" is not a valid field to query/g)) if (m[1]) out.push(m[1]);
  return out;
}

/** One process holding GPU memory, from `--query-compute-apps=gpu_uuid,pid,used_memory`. */
export interface ComputeApp {
  gpuUuid: string;
  pid: number;
  usedMemoryMiB: number | undefined;
}

export const COMPUTE_APP_FIELDS = ["gpu_uuid", "pid", "used_memory"] as const;

export function parseComputeAppsCsv(text: string): ComputeApp[] {
  const apps: ComputeApp[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === "") continue;
    const [uuid, pid, mem] = line.split(",").map((c) => c.trim());
    const pidN = parseNumber(pid);
    if (uuid === undefined || isAbsent(uuid) || pidN === undefined) continue;
    apps.push({ gpuUuid: uuid, pid: pidN, usedMemoryMiB: parseNumber(mem) });
  }
  return apps;
}
