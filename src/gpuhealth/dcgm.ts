/**
 * dcgm-exporter /metrics text → one GpuSample per GPU (or MIG instance), keyed
 * by UUID. Field names follow dcgm-exporter's default-counters.csv and
 * dcp-metrics-included.csv; anything the exporter did not send stays undefined.
 */
import { parsePrometheusText, type Sample } from "../engines/prom-text.ts";

/** Numeric DCGM fields we read, by their exporter metric name. */
const NUMERIC_FIELDS = {
  DCGM_FI_DEV_GPU_UTIL: "utilPct",
  DCGM_FI_DEV_MEM_COPY_UTIL: "memCopyUtilPct",
  DCGM_FI_DEV_FB_USED: "fbUsedMiB",
  DCGM_FI_DEV_FB_FREE: "fbFreeMiB",
  DCGM_FI_DEV_FB_TOTAL: "fbTotalMiB",
  DCGM_FI_DEV_FB_RESERVED: "fbReservedMiB",
  DCGM_FI_DEV_GPU_TEMP: "tempC",
  DCGM_FI_DEV_MEMORY_TEMP: "memoryTempC",
  DCGM_FI_DEV_SLOWDOWN_TEMP: "slowdownTempC",
  DCGM_FI_DEV_SHUTDOWN_TEMP: "shutdownTempC",
  DCGM_FI_DEV_POWER_USAGE: "powerW",
  DCGM_FI_DEV_POWER_MGMT_LIMIT: "powerLimitW",
  DCGM_FI_DEV_SM_CLOCK: "smClockMHz",
  DCGM_FI_DEV_MEM_CLOCK: "memClockMHz",
  DCGM_FI_DEV_PSTATE: "pstate",
  DCGM_FI_DEV_XID_ERRORS: "lastXid",
  DCGM_FI_DEV_ECC_SBE_VOL_TOTAL: "eccSbeVolatile",
  DCGM_FI_DEV_ECC_DBE_VOL_TOTAL: "eccDbeVolatile",
  DCGM_FI_DEV_ECC_SBE_AGG_TOTAL: "eccSbeAggregate",
  DCGM_FI_DEV_ECC_DBE_AGG_TOTAL: "eccDbeAggregate",
  DCGM_FI_DEV_RETIRED_SBE: "retiredPagesSbe",
  DCGM_FI_DEV_RETIRED_DBE: "retiredPagesDbe",
  DCGM_FI_DEV_RETIRED_PENDING: "retiredPagesPending",
  DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS: "uncorrectableRemappedRows",
  DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS: "correctableRemappedRows",
  DCGM_FI_DEV_ROW_REMAP_FAILURE: "rowRemapFailure",
  DCGM_FI_DEV_ROW_REMAP_PENDING: "rowRemapPending",
  DCGM_FI_DEV_PCIE_REPLAY_COUNTER: "pcieReplays",
  DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: "nvlinkCrcFlitErrors",
  DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL: "nvlinkCrcDataErrors",
  DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: "nvlinkReplayErrors",
  DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: "nvlinkRecoveryErrors",
  DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: "clockThrottleReasons",
  DCGM_FI_PROF_GR_ENGINE_ACTIVE: "grEngineActive",
  DCGM_FI_PROF_SM_ACTIVE: "smActive",
  DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: "tensorActive",
  DCGM_FI_PROF_DRAM_ACTIVE: "dramActive",
} as const;

type NumericField = (typeof NUMERIC_FIELDS)[keyof typeof NUMERIC_FIELDS];

/**
 * One GPU as the exporter saw it. Units are in the names (percent 0–100 for
 * DCGM_FI_DEV_*_UTIL, ratios 0–1 for DCGM_FI_PROF_*). `lastXid` is the value of
 * DCGM_FI_DEV_XID_ERRORS: the code of the last XID seen, 0 for none, not a count.
 */
export type GpuSample = {
  uuid: string;
  /** `gpu` label: the index on its host. */
  gpu: number | undefined;
  device: string | undefined;
  modelName: string | undefined;
  /** `Hostname` (older exporters) or `hostname` label. */
  hostname: string | undefined;
  pciBusId: string | undefined;
  driverVersion: string | undefined;
  /** MIG GPU instance id (`GPU_I_ID`) when the series is per MIG instance. */
  migInstance: string | undefined;
  /** Counts from DCGM_EXP_XID_ERRORS_COUNT{xid=…} (XIDs seen in the exporter's recent window). */
  recentXids: Readonly<Record<number, number>>;
} & { [K in NumericField]: number | undefined };

interface DcgmParse {
  gpus: GpuSample[];
  /** Samples of DCGM_* metrics without a UUID label, which cannot be attributed to a GPU. */
  unattributed: number;
  malformedLines: number;
}

function labelOf(labels: Readonly<Record<string, string>>, ...keys: string[]): string | undefined {
  for (const k of keys) {
    const v = labels[k];
    if (v !== undefined && v !== "") return v;
  }
  return undefined;
}

function emptySample(uuid: string, labels: Readonly<Record<string, string>>): GpuSample {
  const gpuLabel = labelOf(labels, "gpu");
  const gpuIndex = gpuLabel === undefined ? NaN : Number(gpuLabel);
  const numeric = Object.fromEntries(Object.values(NUMERIC_FIELDS).map((f) => [f, undefined])) as { [K in NumericField]: undefined };
  return {
    uuid,
    gpu: Number.isInteger(gpuIndex) ? gpuIndex : undefined,
    device: labelOf(labels, "device"),
    modelName: labelOf(labels, "modelName", "DCGM_FI_DEV_NAME"),
    hostname: labelOf(labels, "Hostname", "hostname"),
    pciBusId: labelOf(labels, "pci_bus_id", "DCGM_FI_DEV_PCI_BUSID"),
    driverVersion: labelOf(labels, "DCGM_FI_DRIVER_VERSION"),
    migInstance: labelOf(labels, "GPU_I_ID"),
    recentXids: {},
    ...numeric,
  };
}

/** Fill identity labels that an earlier series of the same GPU lacked. */
function mergeIdentity(target: GpuSample, labels: Readonly<Record<string, string>>): void {
  const fresh = emptySample(target.uuid, labels);
  target.gpu ??= fresh.gpu;
  target.device ??= fresh.device;
  target.modelName ??= fresh.modelName;
  target.hostname ??= fresh.hostname;
  target.pciBusId ??= fresh.pciBusId;
  target.driverVersion ??= fresh.driverVersion;
}

function isNumericField(name: string): name is keyof typeof NUMERIC_FIELDS {
  return Object.hasOwn(NUMERIC_FIELDS, name);
}

/** Parse with bookkeeping (unattributed samples, malformed lines). */
export function parseDcgmExport(text: string): DcgmParse {
  const parsed = parsePrometheusText(text);
  const byKey = new Map<string, GpuSample>();
  let unattributed = 0;
  const gpuFor = (s: Sample): GpuSample | undefined => {
    const uuid = labelOf(s.labels, "UUID", "uuid");
    if (uuid === undefined) return undefined;
    const mig = labelOf(s.labels, "GPU_I_ID");
    const key = mig === undefined ? uuid : `${uuid}/${mig}`;
    let g = byKey.get(key);
    if (!g) {
      g = emptySample(uuid, s.labels);
      byKey.set(key, g);
    } else mergeIdentity(g, s.labels);
    return g;
  };
  for (const s of parsed.samples) {
    if (!s.name.startsWith("DCGM_")) continue;
    const known = isNumericField(s.name) || s.name === "DCGM_EXP_XID_ERRORS_COUNT";
    const g = gpuFor(s);
    if (!g) {
      if (known) unattributed++;
      continue;
    }
    // NaN means the exporter could not read the field: absent, not zero.
    if (!Number.isFinite(s.value)) continue;
    if (s.name === "DCGM_EXP_XID_ERRORS_COUNT") {
      const xid = Number(s.labels.xid);
      if (Number.isInteger(xid) && xid > 0) g.recentXids = { ...g.recentXids, [xid]: (g.recentXids[xid] ?? 0) + s.value };
      continue;
    }
    if (isNumericField(s.name)) {
      const field = NUMERIC_FIELDS[s.name];
      // Several series per GPU happen with pod attribution labels; they carry
      // the same device reading, so the last one wins.
      g[field] = s.value;
    }
  }
  return { gpus: [...byKey.values()], unattributed, malformedLines: parsed.malformed };
}

/** One sample per GPU (per MIG instance where labelled), in the order the text first names them. */
export function parseDcgmMetrics(text: string): GpuSample[] {
  return parseDcgmExport(text).gpus;
}
