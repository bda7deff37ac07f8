/** Redis-side expiry of records whose validity llmgw checks itself: garbage collection only, never a correctness question. */

/**
 * Kept this long past the time llmgw stops honouring a record: the stores
 * compare the record's own expiry with the caller's clock, so a gateway whose
 * clock lags Redis's a little still sees a record until it is really due.
 */
const EXPIRY_SLACK_MS = 3_600_000;

/** PEXPIRE argument for a record llmgw honours for `validMs` more (negative: already due). */
export function expiryTtlMs(validMs: number, slackMs = EXPIRY_SLACK_MS): number {
  return Math.max(0, Math.ceil(validMs)) + slackMs;
}
