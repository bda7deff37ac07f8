import { describe, expect, test } from "bun:test";
import { formatResetDuration, QuotaLimiter } from "../../src/admission/tenant-quota.ts";
import type { TenantConfig } from "../../src/config/types.ts";
import { DEFAULT_COMPLETION_TOKENS_ESTIMATE, estimateTokens } from "../../src/gateway/request/token-estimate.ts";
import { errorResponse, LlmgwError } from "../../src/shared/errors.ts";

const T0 = 1_700_000_000_000;

function tenant(name: string, rpm?: number, tpm?: number): TenantConfig {
  return { name, requestsPerMinute: rpm, tokensPerMinute: tpm };
}

function refused(fn: () => unknown): LlmgwError {
  try {
    fn();
  } catch (err) {
    if (err instanceof LlmgwError) return err;
    throw err;
  }
  throw new Error("expected RATE_LIMITED");
}

const DURATION = /^(\d+h)?(\d+m)?(\d+(\.\d+)?s|\d+ms)$/;

describe("estimateTokens", () => {
  test("ceil(prompt chars / 4) + max_tokens, or the default completion budget", () => {
    expect(estimateTokens({ model: "m", messages: [{ role: "user", content: "abcdefghi" }], max_tokens: 10 })).toBe(3 + 10);
    expect(estimateTokens({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "abcd" }] }] })).toBe(
      1 + DEFAULT_COMPLETION_TOKENS_ESTIMATE,
    );
    expect(estimateTokens({ model: "m", prompt: "12345678", max_completion_tokens: 5 })).toBe(2 + 5);
    expect(estimateTokens({ model: "m", prompt: [[1, 2, 3]], max_tokens: 1 })).toBe(3 + 1);
    expect(estimateTokens({ model: "m", prompt: "abcd", max_tokens: 10, n: 3 })).toBe(1 + 30);
    // embeddings produce no completion
    expect(estimateTokens({ model: "m", input: ["abcd", "efgh"] })).toBe(2);
    expect(estimateTokens(null)).toBe(DEFAULT_COMPLETION_TOKENS_ESTIMATE);
  });
});

describe("formatResetDuration", () => {
  test("OpenAI's (Go's) duration format", () => {
    expect(formatResetDuration(0)).toBe("0s");
    expect(formatResetDuration(19.2)).toBe("20ms");
    expect(formatResetDuration(1000)).toBe("1s");
    expect(formatResetDuration(6500)).toBe("6.5s");
    expect(formatResetDuration(360_000)).toBe("6m0s");
    expect(formatResetDuration(3_723_000)).toBe("1h2m3s");
  });
});

describe("QuotaLimiter", () => {
  test("RPM 3: the 4th request in the same instant is a 429 with Retry-After ≈ 20 s and rate-limit headers", async () => {
    const q = new QuotaLimiter([tenant("acme", 3)]);
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) remaining.push(q.admit("acme", 100, T0).headers["x-ratelimit-remaining-requests"]!);
    expect(remaining).toEqual(["2", "1", "0"]);
    const err = refused(() => q.admit("acme", 100, T0));
    expect(err.code).toBe("RATE_LIMITED");
    expect(err.message).toContain("requests per minute");
    expect(err.retryAfterS).toBeCloseTo(20, 6);
    const res = errorResponse(err);
    expect(res.status).toBe(429);
    expect(res.headers.get("retry-after")).toBe("20");
    expect(res.headers.get("x-ratelimit-limit-requests")).toBe("3");
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(res.headers.get("x-ratelimit-reset-requests")).toBe("1m0s");
    expect(res.headers.get("x-ratelimit-limit-tokens")).toBeNull();
    const body = (await res.json()) as { error: { type: string; code: string } };
    expect(body.error).toMatchObject({ type: "rate_limit_error", code: "RATE_LIMITED" });
  });

  test("the bucket refills continuously: one request back after 20 s, not before", () => {
    const q = new QuotaLimiter([tenant("acme", 3)]);
    for (let i = 0; i < 3; i++) q.admit("acme", 1, T0);
    const early = refused(() => q.admit("acme", 1, T0 + 15_000));
    expect(early.retryAfterS).toBeCloseTo(5, 6);
    expect(q.admit("acme", 1, T0 + 20_000).headers["x-ratelimit-remaining-requests"]).toBe("0");
    refused(() => q.admit("acme", 1, T0 + 20_000));
    // a whole idle minute later the bucket is full again, and no fuller
    const full = q.admit("acme", 1, T0 + 10 * 60_000).headers;
    expect(full["x-ratelimit-remaining-requests"]).toBe("2");
    expect(full["x-ratelimit-reset-requests"]).toBe("20s");
  });

  test("a limit that does not divide a minute evenly still admits exactly `limit` at one instant", () => {
    const q = new QuotaLimiter([tenant("acme", 7, 7)]);
    for (let i = 0; i < 7; i++) q.admit("acme", 1, T0);
    refused(() => q.admit("acme", 1, T0));
  });

  test("TPM: the estimate is reserved; settle refunds when actual < estimate and charges when actual > estimate", () => {
    const q = new QuotaLimiter([tenant("acme", undefined, 1000)]);
    const h = q.admit("acme", 600, T0).headers;
    expect(h["x-ratelimit-limit-tokens"]).toBe("1000");
    expect(h["x-ratelimit-remaining-tokens"]).toBe("400");
    expect(h["x-ratelimit-reset-tokens"]).toBe("36s");
    expect(h["x-ratelimit-limit-requests"]).toBeUndefined();
    const err = refused(() => q.admit("acme", 600, T0));
    expect(err.message).toContain("tokens per minute");
    expect(err.retryAfterS).toBeCloseTo(12, 6); // 200 tokens short at 1000/60 per second
    // only 100 of the 600 were used: 500 come back, so 600 now fit
    q.settle("acme", 600, 100, T0);
    expect(q.admit("acme", 600, T0).headers["x-ratelimit-remaining-tokens"]).toBe("300");
    // that one used 900: 300 more charged, nothing left
    q.settle("acme", 600, 900, T0);
    const after = refused(() => q.admit("acme", 1, T0));
    expect(after.retryAfterS).toBeCloseTo(0.06, 6);
  });

  test("settle may overdraw (the tenant waits it off) but by at most one more minute; refunds never overfill", () => {
    const q = new QuotaLimiter([tenant("acme", undefined, 1000)]);
    q.admit("acme", 100, T0);
    q.settle("acme", 100, 50_000, T0);
    const err = refused(() => q.admit("acme", 1, T0));
    expect(err.retryAfterS!).toBeGreaterThan(60);
    expect(err.retryAfterS!).toBeLessThanOrEqual(60.06 + 1e-6);
    const q2 = new QuotaLimiter([tenant("acme", undefined, 1000)]);
    q2.settle("acme", 5000, 0, T0);
    q2.settle("acme", 5000, 0, T0);
    expect(q2.admit("acme", 1, T0).headers["x-ratelimit-remaining-tokens"]).toBe("999");
  });

  test("refund gives tokens back but not the request count", () => {
    const q = new QuotaLimiter([tenant("acme", 2, 1000)]);
    q.admit("acme", 800, T0);
    refused(() => q.admit("acme", 800, T0));
    q.settle("acme", 800, 0, T0);
    const h = q.admit("acme", 800, T0).headers;
    expect(h["x-ratelimit-remaining-tokens"]).toBe("200");
    expect(h["x-ratelimit-remaining-requests"]).toBe("0");
    const err = refused(() => q.admit("acme", 1, T0));
    expect(err.message).toContain("requests per minute");
    expect(err.message).not.toContain("tokens per minute");
  });

  test("a refused request charges nothing", () => {
    const q = new QuotaLimiter([tenant("acme", 10, 1000)]);
    q.admit("acme", 900, T0);
    for (let i = 0; i < 5; i++) refused(() => q.admit("acme", 500, T0));
    const h = q.admit("acme", 100, T0).headers;
    expect(h["x-ratelimit-remaining-requests"]).toBe("8");
    expect(h["x-ratelimit-remaining-tokens"]).toBe("0");
  });

  test("an estimate above the whole TPM limit is refused without Retry-After (waiting cannot help)", () => {
    const q = new QuotaLimiter([tenant("acme", undefined, 1000)]);
    const err = refused(() => q.admit("acme", 1001, T0));
    expect(err.code).toBe("RATE_LIMITED");
    expect(err.message).toContain("Request too large");
    expect(err.retryAfterS).toBeUndefined();
    expect(errorResponse(err).headers.get("retry-after")).toBeNull();
    expect(q.admit("acme", 1000, T0).headers["x-ratelimit-remaining-tokens"]).toBe("0");
  });

  test("tenants without an entry or without a limit kind are never limited for it", () => {
    const q = new QuotaLimiter([tenant("acme", 1), tenant("free")]);
    for (let i = 0; i < 10_000; i++) {
      expect(q.admit("other", 1_000_000, T0).headers).toEqual({});
      q.admit("free", 1_000_000, T0);
    }
    q.settle("other", 1, 1_000_000, T0);
    q.settle("free", 1, 0, T0);
    q.admit("acme", 1_000_000_000, T0); // no token limit: any size passes
  });

  test("headers on success are present and well-formed for both kinds", () => {
    const q = new QuotaLimiter([tenant("acme", 600, 90_000)]);
    let h: Record<string, string> = {};
    for (let i = 0; i < 50; i++) h = q.admit("acme", 1234, T0 + i * 7).headers;
    expect(Object.keys(h).sort()).toEqual([
      "x-ratelimit-limit-requests",
      "x-ratelimit-limit-tokens",
      "x-ratelimit-remaining-requests",
      "x-ratelimit-remaining-tokens",
      "x-ratelimit-reset-requests",
      "x-ratelimit-reset-tokens",
    ]);
    for (const k of ["limit-requests", "limit-tokens", "remaining-requests", "remaining-tokens"]) expect(h[`x-ratelimit-${k}`]).toMatch(/^\d+$/);
    expect(h["x-ratelimit-reset-requests"]).toMatch(DURATION);
    expect(h["x-ratelimit-reset-tokens"]).toMatch(DURATION);
    expect(Number(h["x-ratelimit-remaining-requests"])).toBeLessThan(600);
    expect(Number(h["x-ratelimit-remaining-tokens"])).toBeLessThan(90_000 - 49 * 1234 + 100);
  });
});
