/** The data plane's parts, assembled once by the gateway at startup: each stage takes only its own part (its *Deps type), never this whole. */

import type { TenantQuota } from "../admission/tenant-quota.ts";
import type { ResponseCache } from "../cache/response-cache-store.ts";
import type { Config } from "../config/types.ts";
import type { DemandSignals } from "../control/autoscale/demand.ts";
import type { GatewayJobs } from "../jobs/jobs-service.ts";
import type { GatewayResponses } from "../jobs/responses-service.ts";
import type { LiveKeys } from "../keys/live-keys.ts";
import type { JobsMetrics } from "../metrics/jobs-metrics.ts";
import type { GatewayMetrics } from "../metrics/registry.ts";
import type { ClusterStatus } from "../protocol/cluster-status.ts";
import type { EndpointTable } from "../shared/endpoint-table.ts";
import type { GpuSaturationTable } from "../shared/gpu-saturation-table.ts";
import type { Logger } from "../shared/logger.ts";
import type { RequestTracer } from "../tracing/tracer-contract.ts";
import type { AdmissionClient } from "./admission-client.ts";
import type { Authenticator, Principal } from "./api-keys.ts";
import type { CircuitBreakers } from "./circuit-breaker.ts";
import type { ColdStartWaits } from "./cold-start-waits.ts";
import type { ContinuationPolicy } from "./continuation-policy.ts";
import type { EndpointRegistry } from "./endpoints.ts";
import type { ModelCatalog } from "./model-catalog.ts";
import type { PromptTokenizer } from "./prompt-tokens.ts";
import type { RetryBudget } from "./retry-budget.ts";
import type { RouteSupport } from "./route-support.ts";
import type { UpstreamDial, UpstreamFetch } from "./upstream-reach.ts";

export interface GatewayContext {
  config: Config;
  catalog: ModelCatalog;
  /** The shared endpoint table (read-only here: the registry and the workers write it). */
  table: EndpointTable;
  endpoints: EndpointRegistry;
  admission: AdmissionClient;
  breakers: CircuitBreakers;
  budget: RetryBudget;
  dial: UpstreamDial;
  /** How attempts reach engines: global fetch when absent (a fake engine in an in-process test). */
  upstreamFetch?: UpstreamFetch;
  metrics: GatewayMetrics;
  log: Logger;
  /** Whether any configured scorer needs prompt-prefix hashes (skip hashing otherwise). */
  usesPrefixHashes: boolean;
  auth: Authenticator;
  /** Live API keys (created through the admin API), kept in the state backend; the authenticator consults them after the config's keys. */
  liveKeys: LiveKeys<readonly Principal[]>;
  quota: TenantQuota;
  /** Mid-stream continuation: what may be continued, and where. */
  continuation: ContinuationPolicy;
  /** Which routes each endpoint serves (configured, or learned from its 404s). */
  routes: RouteSupport;
  /** A tenant as a metric label: configured tenants by name, others as "other". */
  tenantLabel(tenant: string): string;
  // Batch jobs, idempotency, response cache, GPU-saturation shedding
  /** The Files and Batches API, its runner and the idempotency records (store opened on first use). */
  jobs: GatewayJobs;
  /** The Responses API's stored responses and background runner (store opened on first use). */
  responses: GatewayResponses;
  cache: ResponseCache;
  /** Per pool row: sustained GPU saturation, published by the health worker. */
  gpuSaturation: GpuSaturationTable;
  jobsMetrics: JobsMetrics;
  /** The prompt's token ids for precise-prefix routing (asked only where an endpoint of the model publishes KV events). */
  promptTokens: PromptTokenizer;
  /** Several gateways sharing Redis: this one's part; absent with the embedded state. */
  cluster?: { status(): ClusterStatus };
  /** The fleet loads declared LoRA adapters on demand: how to ask, and how long a request waits (absent: no fleet). */
  adapterLoads?: { requested(adapter: string): void; waitMs: number };
  /** Models the fleet scales to zero: a request finding one at zero waits for a replica (absent: no fleet). */
  coldStarts?: ColdStartWaits;
  /** What the fleet's autoscaler reads of its models' requests (absent: no fleet). */
  demand?: DemandSignals;
  /** OpenTelemetry traces: absent when tracing is off (the request path then creates no span and reads no header). */
  tracer?: RequestTracer;
}
