/** The validated, frozen configuration the rest of llmgw reads (defaults applied). */
import type { FilterName, PickerName, RelayVariantName, ScorerName } from "./plugin-names.ts";
import type { LogLevel } from "../shared/logger.ts";

export interface Deadlines {
  dialMs: number;
  headersMs: number;
  firstTokenMs: number;
  idleMs: number;
  totalMs: number;
}

export interface ModelConfig {
  name: string;
  aliases: readonly string[];
  fallback: readonly string[];
  deadlines: Deadlines;
}

export type EngineFlavor = "auto" | "vllm" | "sglang";

export interface EndpointConfig {
  id: string;
  url: string;
  /** undefined: discovered from the endpoint's /v1/models. */
  models: readonly string[] | undefined;
  pool: string;
  engine: EngineFlavor;
  gpuIds: readonly string[];
  /** dcgm-exporter URL of the endpoint's node, if GPU health is watched. */
  dcgmUrl: string | undefined;
}

export interface Listen {
  host: string;
  port: number;
}

export interface BandConfig {
  name: string;
  /** Flows while pool saturation < ceiling; > 1 never waits. */
  ceiling: number;
  queueLimit: number;
  ttlMs: number;
}

export interface ApiKeyConfig {
  /** sha256 of the key, lowercase hex. */
  sha256: string;
  tenant: string;
  /** Index into admission.bands of the highest band this key may use. */
  maxBand: number;
}

export interface TenantConfig {
  name: string;
  requestsPerMinute: number | undefined;
  tokensPerMinute: number | undefined;
}

export interface AdmissionConfig {
  enabled: boolean;
  /** Highest priority first. */
  bands: readonly BandConfig[];
  /** Index into bands. */
  defaultBand: number;
  fairness: "round-robin" | "token-deficit";
  quantumTokens: number;
  initialCapacity: number;
  headroom: number;
  staleMetrics: "ignore" | "saturated";
  /** Decide unsaturated requests on the main thread (false: everything through the scheduler worker). */
  fastPath: boolean;
}

export interface Config {
  listen: Listen;
  adminListen: Listen;
  metricsListen: Listen | null;
  logLevel: LogLevel;
  maxBodyBytes: number;
  /** Largest non-streaming engine answer relayed (larger: 502 UPSTREAM_RESPONSE_TOO_LARGE). */
  maxResponseBytes: number;
  /** Slots in the shared endpoint table. */
  maxEndpoints: number;
  relayVariant: RelayVariantName;
  /** Concurrent streams the gateway is sized for: checked against the open-files limit at start. */
  maxOpenStreams: number;
  /** Deadlines for models not listed under `models` (and the base for those that are). */
  deadlines: Deadlines;
  models: readonly ModelConfig[];
  endpoints: readonly EndpointConfig[];
  scheduling: {
    filters: readonly FilterName[];
    scorers: readonly { name: ScorerName; weight: number }[];
    picker: PickerName;
    prefixAffinity: { blockChars: number; maxBlocks: number; lruEntries: number };
  };
  health: { pollIntervalMs: number; timeoutMs: number; staleAfterMs: number };
  retry: { maxAttempts: number; budgetRatio: number; minPerS: number; backoffMs: number; maxRetryAfterMs: number };
  circuitBreaker: { failureThreshold: number; openMs: number };
  auth: { enabled: boolean; keys: readonly ApiKeyConfig[] };
  /** Configured tenants (quotas); keys may name tenants without an entry (no quota). */
  tenants: readonly TenantConfig[];
  admission: AdmissionConfig;
  /** Things worth a warning at start (plaintext keys, auth off); logged by serve. */
  warnings: readonly string[];
}
