import { describe, expect, test } from "bun:test";
import { parsePrometheusText, sumSamples } from "../../src/engines/prom-text.ts";
import { sharedFixture as fixture } from "../helpers/fixtures.ts";

describe("prometheus text parser", () => {
  test("parses labels with escapes, special values and timestamps", () => {
    const p = parsePrometheusText(
      [
        "# HELP x help",
        "# TYPE x gauge",
        'x{a="1",b="q\\"uote",c="back\\\\slash"} 3.5 1700000000000',
        "y NaN",
        "z +Inf",
        'w{le="0.1"} -Inf',
        "bad line {",
        'v{a="unterminated} 1',
      ].join("\n"),
    );
    expect(p.samples).toEqual([
      { name: "x", labels: { a: "1", b: 'q"uote', c: "back\\slash" }, value: 3.5 },
      { name: "y", labels: {}, value: NaN },
      { name: "z", labels: {}, value: Infinity },
      { name: "w", labels: { le: "0.1" }, value: -Infinity },
    ]);
    expect(p.types.get("x")).toBe("gauge");
    expect(p.malformed).toBe(2);
  });

  test("reads the real vLLM, SGLang and DCGM samples", () => {
    const vllm = parsePrometheusText(fixture("vllm-metrics__opt-125m__datadog-fixture.txt"));
    expect(vllm.malformed).toBe(0);
    expect(sumSamples(vllm.samples, "vllm:num_requests_running")).toBeNumber();
    const sglang = parsePrometheusText(fixture("sglang-metrics__v0.5.10.post1__datadog-fixture.txt"));
    expect(sglang.malformed).toBe(0);
    expect(sumSamples(sglang.samples, "sglang:num_running_reqs")).toBeNumber();
    const dcgm = parsePrometheusText(fixture("dcgm-exporter-metrics__tesla-t4__datadog-fixture.txt"));
    expect(dcgm.malformed).toBe(0);
    expect(dcgm.samples.some((s) => s.name === "DCGM_FI_DEV_GPU_TEMP" && s.labels.modelName === "Tesla T4")).toBe(true);
  });

  test("absent metric sums to undefined, not 0", () => {
    expect(sumSamples([], "nope")).toBeUndefined();
  });
});
