/** The `tracing` block and the standard OTEL_* variables: off by default, on by an OTLP endpoint, config keys over variables, bad variables refused at start, headers masked when printed. */
import { describe, expect, test } from "bun:test";
import * as D from "../../src/config/defaults.ts";
import { buildConfig } from "../../src/config/load.ts";
import { effectiveConfigYaml, MASK } from "../../src/config/print-config.ts";
import { issuesOf } from "../helpers/config-issues.ts";

const tracing = (raw: Record<string, unknown>, env: Record<string, string> = {}) => buildConfig(raw, env).tracing;

describe("tracing settings", () => {
  test("off with neither a config block nor an OTLP endpoint variable", () => {
    expect(tracing({})).toBeNull();
    expect(tracing({}, { OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" })).toBeNull();
  });

  test("OTEL_EXPORTER_OTLP_ENDPOINT turns it on, /v1/traces appended, the SDK's defaults otherwise", () => {
    expect(tracing({}, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318/" })).toEqual({
      endpoint: "http://collector:4318/v1/traces",
      protocol: "http/protobuf",
      headers: {},
      serviceName: D.DEFAULT_TRACING_SERVICE_NAME,
      sampleRatio: 1,
      parentBased: true,
      maxQueueSpans: D.DEFAULT_TRACING_MAX_QUEUE_SPANS,
      maxBatchSpans: D.DEFAULT_TRACING_MAX_BATCH_SPANS,
      exportIntervalMs: D.DEFAULT_TRACING_EXPORT_INTERVAL_MS,
      exportTimeoutMs: D.DEFAULT_TRACING_EXPORT_TIMEOUT_MS,
    });
  });

  test("the per-signal endpoint is used as it is and wins over the general one", () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "https://b/otlp/traces" };
    expect(tracing({}, env)?.endpoint).toBe("https://b/otlp/traces");
  });

  test("OTEL_SDK_DISABLED and enabled: false turn it off whatever else is set", () => {
    expect(tracing({}, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318", OTEL_SDK_DISABLED: "true" })).toBeNull();
    expect(tracing({ tracing: { enabled: false } }, { OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318" })).toBeNull();
    expect(tracing({ tracing: { enabled: true } })?.endpoint).toBe(D.DEFAULT_TRACING_ENDPOINT);
  });

  test("variables fill what the config leaves out; config keys win", () => {
    const env = {
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_HEADERS: "api-key=s%3Dcret, x-team = infra",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "x-team=traces",
      OTEL_SERVICE_NAME: "gw-east",
      OTEL_TRACES_SAMPLER: "traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
      OTEL_EXPORTER_OTLP_TIMEOUT: "2500",
    };
    expect(tracing({}, env)).toMatchObject({
      protocol: "http/json",
      headers: { "api-key": "s=cret", "x-team": "traces" },
      serviceName: "gw-east",
      sampleRatio: 0.25,
      parentBased: false,
      exportTimeoutMs: 2500,
    });
    const own = { protocol: "http/protobuf", service_name: "mine", sample_ratio: 0.5, headers: { "x-team": "config" } };
    expect(tracing({ tracing: own }, env)).toMatchObject({
      protocol: "http/protobuf",
      headers: { "api-key": "s=cret", "x-team": "config" },
      serviceName: "mine",
      sampleRatio: 0.5,
      parentBased: true,
    });
    expect(tracing({}, { ...env, OTEL_TRACES_SAMPLER: "parentbased_always_off" })).toMatchObject({ sampleRatio: 0, parentBased: true });
  });

  test("a variable llmgw cannot honour stops the start with its name; a bad key with its path", () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: "http://a:4318" };
    expect(issuesOf(() => buildConfig({}, { ...on, OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" })).join("\n")).toContain("OTEL_EXPORTER_OTLP_PROTOCOL");
    expect(issuesOf(() => buildConfig({}, { ...on, OTEL_TRACES_SAMPLER: "jaeger_remote" })).join("\n")).toContain("OTEL_TRACES_SAMPLER");
    expect(issuesOf(() => buildConfig({}, { ...on, OTEL_EXPORTER_OTLP_HEADERS: "novalue" })).join("\n")).toContain("OTEL_EXPORTER_OTLP_HEADERS");
    expect(issuesOf(() => buildConfig({ tracing: { protocol: "grpc" } })).join("\n")).toContain("tracing.protocol");
    expect(issuesOf(() => buildConfig({ tracing: { sample_ratio: 2 } })).join("\n")).toContain("tracing.sample_ratio");
    expect(issuesOf(() => buildConfig({ tracing: { endpoint: "collector:4318" } })).join("\n")).toContain("tracing.endpoint");
    // Off, the variables are not read at all.
    expect(buildConfig({}, { OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }).tracing).toBeNull();
  });

  test("--print-config masks the exporter's headers", () => {
    const c = buildConfig({ tracing: { enabled: true, headers: { authorization: "Bearer collector-secret" } } });
    const yaml = effectiveConfigYaml(c.document, ["test"]);
    expect(yaml).not.toContain("collector-secret");
    expect(yaml).toContain(MASK);
  });
});
