import { describe, expect, test } from "bun:test";
import { QuotaLimiter } from "../../src/admission/tenant-quota.ts";
import { buildConfig, sha256Hex } from "../../src/config/load.ts";
import { Authenticator } from "../../src/gateway/api-keys.ts";
import { errorResponse, LlmgwError } from "../../src/shared/errors.ts";

const HASHED_KEY = "sk-hashed-0123456789";
const PLAIN_KEY = "sk-plain-abcdefghij";
const DEFAULT_KEY = "sk-default-klmnopqrs";

function authConfig(enabled = true) {
  return buildConfig({
    auth: {
      enabled,
      keys: [
        { key_sha256: sha256Hex(HASHED_KEY), tenant: "acme", max_band: "interactive" },
        { key: PLAIN_KEY, tenant: "globex", max_band: "batch" },
        { key: DEFAULT_KEY, tenant: "initech" },
      ],
    },
  });
}

function headers(h: Record<string, string>): Headers {
  return new Headers(h);
}

function caught(fn: () => unknown): LlmgwError {
  try {
    fn();
  } catch (err) {
    if (err instanceof LlmgwError) return err;
    throw err;
  }
  throw new Error("expected an LlmgwError");
}

describe("Authenticator", () => {
  const c = authConfig();
  const auth = new Authenticator(c.auth, c.admission);
  const bandNames = c.admission.bands.map((b) => b.name);

  test("a key configured by its sha256 maps to its tenant and max band", () => {
    const p = auth.authenticate(headers({ authorization: `Bearer ${HASHED_KEY}` }));
    expect(p).toEqual({ tenant: "acme", band: 0, bandName: "interactive" });
  });

  test("a plaintext-configured key works the same (the config hashes it); the scheme is case-insensitive", () => {
    const p = auth.authenticate(headers({ authorization: `bearer ${PLAIN_KEY}` }));
    expect(p).toEqual({ tenant: "globex", band: bandNames.indexOf("batch"), bandName: "batch" });
  });

  test("a key with no max_band gets the default band", () => {
    const p = auth.authenticate(headers({ authorization: `Bearer ${DEFAULT_KEY}` }));
    expect(p.tenant).toBe("initech");
    expect(p.band).toBe(c.admission.defaultBand);
    expect(p.bandName).toBe(bandNames[c.admission.defaultBand]!);
  });

  test("missing header, wrong scheme, empty key and unknown key are 401 INVALID_API_KEY in OpenAI's shape, never echoing the key", async () => {
    const cases: [Record<string, string>, RegExp][] = [
      [{}, /didn't provide an API key/],
      [{ authorization: `Basic ${HASHED_KEY}` }, /Bearer auth/],
      [{ authorization: HASHED_KEY }, /Bearer auth/],
      [{ authorization: "Bearer    " }, /didn't provide an API key/],
      [{ authorization: "Bearer sk-nope-secret-value" }, /Incorrect API key provided/],
    ];
    for (const [h, message] of cases) {
      const err = caught(() => auth.authenticate(headers(h)));
      expect(err.code).toBe("INVALID_API_KEY");
      expect(err.message).toMatch(message);
      const res = errorResponse(err);
      expect(res.status).toBe(401);
      const body = (await res.json()) as { error: { message: string; type: string; param: unknown; code: string } };
      expect(body.error.type).toBe("authentication_error");
      expect(body.error.code).toBe("INVALID_API_KEY");
      expect(body.error.param).toBeNull();
      expect(body.error.message).not.toContain("sk-nope-secret-value");
      expect(body.error.message).not.toContain(HASHED_KEY);
    }
  });

  test("x-llmgw-priority may lower the band, is capped at the key's max band, and an unknown band is a 400", async () => {
    const lower = auth.authenticate(headers({ authorization: `Bearer ${HASHED_KEY}`, "x-llmgw-priority": "batch" }));
    expect(lower).toEqual({ tenant: "acme", band: bandNames.indexOf("batch"), bandName: "batch" });
    const capped = auth.authenticate(headers({ authorization: `Bearer ${PLAIN_KEY}`, "x-llmgw-priority": "interactive" }));
    expect(capped).toEqual({ tenant: "globex", band: bandNames.indexOf("batch"), bandName: "batch" });
    const same = auth.authenticate(headers({ authorization: `Bearer ${DEFAULT_KEY}`, "x-llmgw-priority": " Standard " }));
    expect(same.bandName).toBe("standard");
    const err = caught(() => auth.authenticate(headers({ authorization: `Bearer ${HASHED_KEY}`, "x-llmgw-priority": "urgent" })));
    expect(err.code).toBe("INVALID_REQUEST");
    expect(err.param).toBe("x-llmgw-priority");
    const res = errorResponse(err);
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { param: string } }).error.param).toBe("x-llmgw-priority");
  });

  test("a bad key is refused before the priority header is looked at", () => {
    const err = caught(() => auth.authenticate(headers({ authorization: "Bearer wrong-key-123", "x-llmgw-priority": "urgent" })));
    expect(err.code).toBe("INVALID_API_KEY");
  });

  test("auth off: anonymous at the default band, Authorization ignored, priority still capped at the default band", () => {
    const off = authConfig(false);
    const a = new Authenticator(off.auth, off.admission);
    const def = { tenant: "anonymous", band: off.admission.defaultBand, bandName: bandNames[off.admission.defaultBand]! };
    expect(a.authenticate(headers({}))).toEqual(def);
    expect(a.authenticate(headers({ authorization: "Bearer whatever" }))).toEqual(def);
    expect(a.authenticate(headers({ authorization: `Bearer ${HASHED_KEY}` }))).toEqual(def);
    expect(a.authenticate(headers({ "x-llmgw-priority": "interactive" }))).toEqual(def);
    expect(a.authenticate(headers({ "x-llmgw-priority": "batch" })).bandName).toBe("batch");
  });

  test("micro-benchmark: authenticate() + admit() per call (printed, not asserted)", () => {
    const q = new QuotaLimiter([{ name: "acme", requestsPerMinute: 1e12, tokensPerMinute: 1e15 }]);
    const h = headers({ authorization: `Bearer ${HASHED_KEY}`, "x-llmgw-priority": "standard" });
    const run = (n: number): number => {
      const t0 = performance.now();
      let now = 1_000_000;
      for (let i = 0; i < n; i++) {
        const p = auth.authenticate(h);
        q.admit(p.tenant, 300, (now += 0.001));
      }
      return ((performance.now() - t0) * 1e6) / n;
    };
    run(20_000);
    const both = run(100_000);
    const t0 = performance.now();
    for (let i = 0; i < 100_000; i++) auth.authenticate(h);
    const authOnly = ((performance.now() - t0) * 1e6) / 100_000;
    console.log(`gates micro-benchmark: authenticate()+admit() ${both.toFixed(0)} ns/call; authenticate() alone ${authOnly.toFixed(0)} ns/call`);
    expect(both).toBeGreaterThan(0);
  });
});
