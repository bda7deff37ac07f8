/**
 * The `responses` block: how the gateway keeps Responses API state
 * (conversation state across replicas, background responses), and the
 * transcription upload limit. Wire schema and its resolution to the
 * validated form.
 */
import { z } from "zod";
import * as D from "./defaults.ts";

export const responsesSchema = z
  .object({
    /** A stored response (and its conversation) is kept this long, then a follow-up naming it gets 400 PREVIOUS_RESPONSE_NOT_FOUND. */
    store_ttl_s: z
      .number()
      .int()
      .min(1)
      .max(365 * 86_400)
      .default(D.DEFAULT_RESPONSES_STORE_TTL_S),
    /** Bytes each tenant's stored responses may take together; past it the tenant's oldest are evicted. */
    max_stored_bytes_per_tenant: z
      .number()
      .int()
      .min(64 * 1024)
      .max(64 * 1024 * 1024 * 1024)
      .default(D.DEFAULT_RESPONSES_MAX_STORED_BYTES_PER_TENANT),
    /** A response whose record (response, its input, the conversation before it) is larger is answered but not stored. */
    max_record_bytes: z
      .number()
      .int()
      .min(1024)
      .max(1024 * 1024 * 1024)
      .default(D.DEFAULT_RESPONSES_MAX_RECORD_BYTES),
    /** Background responses this gateway runs at once; more wait queued. */
    background_concurrency: z.number().int().min(1).max(10_000).default(D.DEFAULT_RESPONSES_BACKGROUND_CONCURRENCY),
  })
  .strict();

export const RESPONSES_DEFAULTS = responsesSchema.parse({});

export interface ResponsesConfig {
  storeTtlMs: number;
  maxStoredBytesPerTenant: number;
  maxRecordBytes: number;
  backgroundConcurrency: number;
}

export function resolveResponsesConfig(r: z.output<typeof responsesSchema>): ResponsesConfig {
  return {
    storeTtlMs: r.store_ttl_s * 1000,
    maxStoredBytesPerTenant: r.max_stored_bytes_per_tenant,
    maxRecordBytes: r.max_record_bytes,
    backgroundConcurrency: r.background_concurrency,
  };
}
