/**
 * Runs nvidia-smi (path configurable) and turns its output into GPU records.
 * Optional fields the driver rejects are dropped and the query retried; a
 * machine without nvidia-smi is a node with zero GPUs, not an error.
 */
import {
  COMPUTE_APP_FIELDS,
  type ComputeApp,
  type GpuRecord,
  OPTIONAL_GPU_FIELDS,
  parseComputeAppsCsv,
  parseGpuCsv,
  REQUIRED_GPU_FIELDS,
  rejectedFields,
} from "./nvidia-smi-csv.ts";

export const DEFAULT_NVIDIA_SMI = "nvidia-smi";
const NVIDIA_SMI_TIMEOUT_MS = 15_000;

interface GpuDiscovery {
  gpus: GpuRecord[];
  /** Whether an nvidia-smi binary was found and answered. */
  nvidiaSmiFound: boolean;
  /** Optional fields this driver rejected (dropped from the query). */
  droppedFields: string[];
  /** Why discovery came back empty or partial, for people; undefined when all went well. */
  note: string | undefined;
  /** Per-process GPU memory; undefined when the process query failed. */
  computeApps: ComputeApp[] | undefined;
}

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(argv: string[]): Promise<RunResult | "not-found"> {
  const exe = argv[0] ?? "";
  const resolved = exe.includes("/") ? exe : Bun.which(exe);
  if (!resolved) return "not-found";
  let proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  try {
    proc = Bun.spawn([resolved, ...argv.slice(1)], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  } catch {
    return "not-found"; // ENOENT/EACCES on an explicit path
  }
  const timer = setTimeout(() => proc.kill("SIGKILL"), NVIDIA_SMI_TIMEOUT_MS);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

function queryArgs(nvidiaSmi: string, fields: readonly string[]): string[] {
  return [nvidiaSmi, `--query-gpu=${fields.join(",")}`, "--format=csv,noheader,nounits"];
}

/** Discover GPUs through `nvidiaSmi`. Never throws: failures come back as zero GPUs with a note. */
export async function discoverGpus(nvidiaSmi: string = DEFAULT_NVIDIA_SMI): Promise<GpuDiscovery> {
  let fields: string[] = [...REQUIRED_GPU_FIELDS, ...OPTIONAL_GPU_FIELDS];
  const dropped: string[] = [];
  for (let attempt = 0; attempt <= OPTIONAL_GPU_FIELDS.length; attempt++) {
    const r = await run(queryArgs(nvidiaSmi, fields));
    if (r === "not-found") {
      return { gpus: [], nvidiaSmiFound: false, droppedFields: dropped, note: `no nvidia-smi at '${nvidiaSmi}': node has zero GPUs`, computeApps: undefined };
    }
    if (r.code === 0) {
      const parsed = parseGpuCsv(r.stdout, fields);
      const note = parsed.malformed.length > 0 ? `${parsed.malformed.length} unreadable nvidia-smi row(s)` : undefined;
      return { gpus: parsed.gpus, nvidiaSmiFound: true, droppedFields: dropped, note, computeApps: await discoverComputeApps(nvidiaSmi) };
    }
    const rejected = rejectedFields(r.stdout + r.stderr);
    const optional = rejected.filter((f) => (OPTIONAL_GPU_FIELDS as readonly string[]).includes(f) && fields.includes(f));
    if (optional.length === 0) {
      const why = (r.stderr || r.stdout).trim().split("\n")[0] ?? "";
      return { gpus: [], nvidiaSmiFound: true, droppedFields: dropped, note: `nvidia-smi exited ${r.code}: ${why}`, computeApps: undefined };
    }
    fields = fields.filter((f) => !optional.includes(f));
    dropped.push(...optional);
  }
  return { gpus: [], nvidiaSmiFound: true, droppedFields: dropped, note: "nvidia-smi kept rejecting fields", computeApps: undefined };
}

async function discoverComputeApps(nvidiaSmi: string): Promise<ComputeApp[] | undefined> {
  const r = await run([nvidiaSmi, `--query-compute-apps=${COMPUTE_APP_FIELDS.join(",")}`, "--format=csv,noheader,nounits"]);
  if (r === "not-found" || r.code !== 0) return undefined;
  return parseComputeAppsCsv(r.stdout);
}
