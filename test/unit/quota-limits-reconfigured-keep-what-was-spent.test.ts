/** QuotaLimiter.reconfigure (a config reload): new limits apply at once, and a tenant keeps what it spent in the last minute. */
import { describe, expect, test } from "bun:test";
import { QuotaLimiter } from "../../src/admission/tenant-quota.ts";
import { LlmgwError } from "../../src/shared/errors.ts";

const T0 = 1_700_000_000_000;

function admitted(q: QuotaLimiter, tenant: string, now: number): boolean {
  try {
    q.admit(tenant, 1, now);
    return true;
  } catch (err) {
    if (err instanceof LlmgwError && err.code === "RATE_LIMITED") return false;
    throw err;
  }
}

describe("QuotaLimiter.reconfigure", () => {
  test("a lowered limit counts what was already spent: no fresh bucket", () => {
    const q = new QuotaLimiter([{ name: "t", requestsPerMinute: 10, tokensPerMinute: undefined }]);
    for (let i = 0; i < 5; i++) expect(admitted(q, "t", T0)).toBe(true);
    q.reconfigure([{ name: "t", requestsPerMinute: 5, tokensPerMinute: undefined }], T0);
    expect(admitted(q, "t", T0)).toBe(false);
  });

  test("a raised limit frees room at once; a new tenant is limited, a removed one is not", () => {
    const q = new QuotaLimiter([{ name: "t", requestsPerMinute: 2, tokensPerMinute: undefined }]);
    expect(admitted(q, "t", T0)).toBe(true);
    expect(admitted(q, "t", T0)).toBe(true);
    expect(admitted(q, "t", T0)).toBe(false);
    q.reconfigure(
      [
        { name: "t", requestsPerMinute: 4, tokensPerMinute: undefined },
        { name: "new", requestsPerMinute: 1, tokensPerMinute: undefined },
      ],
      T0,
    );
    expect(admitted(q, "t", T0)).toBe(true);
    expect(admitted(q, "t", T0)).toBe(true);
    expect(admitted(q, "t", T0)).toBe(false);
    expect(admitted(q, "new", T0)).toBe(true);
    expect(admitted(q, "new", T0)).toBe(false);
    q.reconfigure([], T0);
    for (let i = 0; i < 10; i++) expect(admitted(q, "t", T0)).toBe(true);
  });
});
