/** The OpenTelemetry SDK wired for llmgw: sampler, bounded batch export over OTLP/HTTP (protobuf or JSON), and one trace per request. Loaded only when tracing is on. */
import { type Context, ROOT_CONTEXT, SpanKind, trace } from "@opentelemetry/api";
import { ExportResultCode } from "@opentelemetry/core";
import { OTLPTraceExporter as JsonTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as ProtoTraceExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  type Span,
  type SpanExporter,
  type SpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { Counter, type Registry } from "prom-client";
import type { TracingConfig } from "../config/types.ts";
import { type Route, TRACING } from "../metrics/names.ts";
import { OtelRequestTrace, propagator } from "./otel-request-trace.ts";
import type { RequestTrace, RequestTracer } from "./tracer-contract.ts";

/** gen_ai.operation.name per route (the GenAI conventions' well-known values; llmgw's route name for the others). */
const OPERATION: Partial<Record<Route, string>> = {
  chat: "chat",
  responses: "chat",
  messages: "chat",
  completions: "text_completion",
  embeddings: "embeddings",
};

const headerGetter = {
  get: (h: Headers, key: string) => h.get(key) ?? undefined,
  keys: (h: Headers) => [...h.keys()],
};

function samplerOf(t: TracingConfig): Sampler {
  const root = t.sampleRatio >= 1 ? new AlwaysOnSampler() : t.sampleRatio <= 0 ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(t.sampleRatio);
  return t.parentBased ? new ParentBasedSampler({ root }) : root;
}

/**
 * The batch processor's queue, bounded by us so that what is dropped is
 * counted (the SDK drops silently): a finished span waits only while fewer
 * than max_queue_spans do; the exporter's wrapper lets go of a batch as its
 * export starts.
 */
class CountedQueue implements SpanProcessor {
  private waiting = 0;
  constructor(
    private readonly inner: SpanProcessor,
    private readonly max: number,
    private readonly dropped: Counter,
  ) {}
  exported(n: number): void {
    this.waiting = Math.max(0, this.waiting - n);
  }
  onStart(span: Span, parent: Context): void {
    this.inner.onStart(span, parent);
  }
  onEnd(span: ReadableSpan): void {
    // Unsampled spans never reach the exporter (the batch processor skips them): they take no place.
    if ((span.spanContext().traceFlags & 1) === 0) return;
    if (this.waiting >= this.max) {
      this.dropped.inc();
      return;
    }
    this.waiting++;
    this.inner.onEnd(span);
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

class CountingExporter implements SpanExporter {
  queue: CountedQueue | undefined;
  constructor(
    private readonly inner: SpanExporter,
    private readonly failures: Counter,
  ) {}
  export(spans: ReadableSpan[], done: Parameters<SpanExporter["export"]>[1]): void {
    this.queue?.exported(spans.length);
    this.inner.export(spans, (result) => {
      if (result.code !== ExportResultCode.SUCCESS) this.failures.inc();
      done(result);
    });
  }
  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

class OtelRequestTracer implements RequestTracer {
  private readonly tracer;
  constructor(private readonly provider: TracerProvider) {
    this.tracer = provider.getTracer("llmgw");
  }

  start(headers: Headers, route: Route, path: string, requestId: string): RequestTrace {
    // A traceparent that does not parse is ignored (W3C Trace Context §4.3): the request starts a trace of its own.
    const parent = headers.has("traceparent") ? propagator.extract(ROOT_CONTEXT, headers, headerGetter) : ROOT_CONTEXT;
    const operation = OPERATION[route] ?? route;
    const span = this.tracer.startSpan(
      operation,
      {
        kind: SpanKind.SERVER,
        attributes: { "gen_ai.operation.name": operation, "http.request.method": "POST", "url.path": path, "llmgw.request_id": requestId },
      },
      parent,
    );
    return new OtelRequestTrace(this.tracer, span, trace.setSpan(parent, span), operation);
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

/** The tracer for `t`; its drop and failure counters join `registry`. */
export function openTracer(t: TracingConfig, registry: Registry): RequestTracer {
  const dropped = new Counter({ ...TRACING.spansDropped, registers: [registry] });
  const failures = new Counter({ ...TRACING.exportFailures, registers: [registry] });
  const Exporter = t.protocol === "http/json" ? JsonTraceExporter : ProtoTraceExporter;
  const exporter = new CountingExporter(
    // A flush (on stop) sends every queued batch at once: the exporter must take them all, or it fails the rest.
    new Exporter({
      url: t.endpoint,
      headers: { ...t.headers },
      timeoutMillis: t.exportTimeoutMs,
      concurrencyLimit: Math.ceil((t.maxQueueSpans + t.maxBatchSpans) / t.maxBatchSpans) + 1,
    }),
    failures,
  );
  const queue = new CountedQueue(
    new BatchSpanProcessor({
      exporter,
      // Our bound comes first; the processor's is only a backstop.
      maxQueueSize: t.maxQueueSpans + t.maxBatchSpans,
      maxExportBatchSize: t.maxBatchSpans,
      scheduledDelayMillis: t.exportIntervalMs,
      exportTimeoutMillis: t.exportTimeoutMs,
    }),
    t.maxQueueSpans,
    dropped,
  );
  exporter.queue = queue;
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ "service.name": t.serviceName }),
    sampler: samplerOf(t),
    spanProcessors: [queue],
  });
  // Spans are parented explicitly (no context manager, nothing registered globally): llmgw's tracing cannot leak into another library's.
  return new OtelRequestTracer(provider);
}
