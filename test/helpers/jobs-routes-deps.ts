/** The Files and Batches routes' dependencies for tests: the configured defaults, with what a test overrides. */
import { buildConfig } from "../../src/config/load.ts";
import type { BatchConfig } from "../../src/config/types.ts";
import { UploadBudget } from "../../src/jobs/file-upload.ts";
import type { JobsRoutesDeps } from "../../src/jobs/jobs-http.ts";

export function routesDeps(
  deps: Pick<JobsRoutesDeps, "store" | "knownModel"> & Partial<Omit<JobsRoutesDeps, "limits">> & { limits?: Partial<BatchConfig> },
): JobsRoutesDeps {
  const limits = { ...buildConfig({}).batch, ...deps.limits };
  return { budget: new UploadBudget(limits.uploadMemoryBytes), bodyReadTimeoutMs: 10_000, ...deps, limits };
}
