import { describe, expect, test } from "bun:test";
import type { EngineMetrics } from "../../src/engines/engine-metrics.ts";
import { INITIAL_SNAPSHOT, isReady, nextSnapshot, type PollOutcome, parseModelIds } from "../../src/polling/readiness.ts";

const METRICS: EngineMetrics = { flavor: "vllm-v1", running: 2, waiting: 1, kvUsage: 0.5, malformedLines: 0 };

function outcome(over: Partial<PollOutcome>): PollOutcome {
  return { healthOk: true, models: ["m"], metrics: METRICS, errors: [], startedAt: 1_000, finishedAt: 1_010, ...over };
}

describe("parseModelIds", () => {
  test("reads ids from an OpenAI model list", () => {
    expect(parseModelIds('{"object":"list","data":[{"id":"a","object":"model"},{"id":"b"}]}')).toEqual(["a", "b"]);
    expect(parseModelIds('{"object":"list","data":[]}')).toEqual([]);
  });

  test("anything else is not a model list", () => {
    for (const body of ["", "not json", "[]", '{"data":{}}', "null", '{"error":{"message":"loading"}}']) expect(parseModelIds(body)).toBeUndefined();
    expect(parseModelIds('{"data":[{"id":1},{"name":"x"},{"id":"ok"}]}')).toEqual(["ok"]);
  });
});

describe("isReady", () => {
  test("needs /health and /v1/models both", () => {
    expect(isReady(true, ["m"], ["m"])).toBe(true);
    expect(isReady(false, ["m"], ["m"])).toBe(false);
    expect(isReady(true, undefined, ["m"])).toBe(false);
  });

  test("configured models must all be loaded", () => {
    expect(isReady(true, ["a", "b", "c"], ["a", "c"])).toBe(true);
    expect(isReady(true, ["a"], ["a", "c"])).toBe(false);
  });

  test("with none configured, any loaded model will do, but not an empty list", () => {
    expect(isReady(true, ["x"], undefined)).toBe(true);
    expect(isReady(true, ["x"], [])).toBe(true);
    expect(isReady(true, [], undefined)).toBe(false);
  });
});

describe("nextSnapshot", () => {
  test("a good poll", () => {
    const s = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000);
    expect(s).toEqual({
      healthy: true,
      loadedModels: ["m"],
      adapters: [],
      ready: true,
      metrics: METRICS,
      metricsAt: 1_010,
      metricsStale: false,
      consecutiveFailures: 0,
      slowPolls: 0,
      lastError: undefined,
      pollMs: 10,
    });
  });

  test("a failed /metrics keeps the last good view and its time; staleness follows the clock", () => {
    const good = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000);
    const soon = nextSnapshot(
      good,
      outcome({ metrics: undefined, errors: ["GET /metrics: timed out after 500 ms"], startedAt: 2_000, finishedAt: 2_500 }),
      ["m"],
      2_000,
    );
    expect(soon.metrics).toBe(METRICS);
    expect(soon.metricsAt).toBe(1_010);
    expect(soon.metricsStale).toBe(false);
    expect(soon.lastError).toBe("GET /metrics: timed out after 500 ms");
    expect(soon.consecutiveFailures).toBe(0); // /health still answers
    const late = nextSnapshot(soon, outcome({ metrics: undefined, startedAt: 5_000, finishedAt: 5_001 }), ["m"], 2_000);
    expect(late.metricsAt).toBe(1_010);
    expect(late.metricsStale).toBe(true);
  });

  test("failures count while /health fails, reset on the first healthy poll", () => {
    let s = nextSnapshot(
      INITIAL_SNAPSHOT,
      outcome({ healthOk: false, models: undefined, metrics: undefined, errors: ["GET /health: ECONNREFUSED"] }),
      undefined,
      2_000,
    );
    s = nextSnapshot(s, outcome({ healthOk: false, models: undefined, metrics: undefined }), undefined, 2_000);
    expect(s.consecutiveFailures).toBe(2);
    expect(s.healthy).toBe(false);
    expect(s.ready).toBe(false);
    expect(s.metrics).toBeUndefined();
    expect(s.metricsStale).toBe(true);
    s = nextSnapshot(s, outcome({}), undefined, 2_000);
    expect(s.consecutiveFailures).toBe(0);
    expect(s.ready).toBe(true);
  });

  test("loading: /health up, /v1/models not answering → healthy but not ready", () => {
    const s = nextSnapshot(INITIAL_SNAPSHOT, outcome({ models: undefined, errors: ["GET /v1/models: HTTP 503"] }), ["m"], 2_000);
    expect(s.healthy).toBe(true);
    expect(s.loadedModels).toBeUndefined();
    expect(s.ready).toBe(false);
    expect(s.consecutiveFailures).toBe(0);
  });

  describe("a ready endpoint whose polls only time out", () => {
    const slow = outcome({ healthOk: false, models: undefined, metrics: undefined, errors: ["GET /health: timed out after 1000 ms"], timedOutOnly: true });

    test("stays ready, with what it last answered, until that many slow polls in a row", () => {
      let s = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000, false, 3);
      s = nextSnapshot(s, slow, ["m"], 2_000, false, 3);
      expect([s.ready, s.healthy, s.loadedModels, s.slowPolls, s.consecutiveFailures]).toEqual([true, true, ["m"], 1, 1]);
      expect(s.lastError).toBe("GET /health: timed out after 1000 ms");
      s = nextSnapshot(s, slow, ["m"], 2_000, false, 3);
      expect([s.ready, s.slowPolls]).toEqual([true, 2]);
      s = nextSnapshot(s, slow, ["m"], 2_000, false, 3);
      expect([s.ready, s.healthy, s.loadedModels, s.slowPolls, s.consecutiveFailures]).toEqual([false, false, undefined, 0, 3]);
    });

    test("a good poll in between starts the count again", () => {
      let s = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000, false, 2);
      s = nextSnapshot(s, slow, ["m"], 2_000, false, 2);
      s = nextSnapshot(s, outcome({}), ["m"], 2_000, false, 2);
      s = nextSnapshot(s, slow, ["m"], 2_000, false, 2);
      expect([s.ready, s.slowPolls]).toEqual([true, 1]);
    });

    test("an answer that says not ready takes it out at once: a status, a refused connection, a list without the model", () => {
      const ready = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000, false, 3);
      const answers = [
        outcome({ healthOk: false, healthStatus: 503, errors: ["GET /health: HTTP 503"] }),
        outcome({ healthOk: false, models: undefined, errors: ["GET /health: ECONNREFUSED"] }),
        outcome({ models: ["other"] }),
        // /health timed out but /v1/models answered 503: the engine said something.
        outcome({ healthOk: false, models: undefined, errors: ["GET /health: timed out", "GET /v1/models: HTTP 503"], timedOutOnly: false }),
      ];
      for (const a of answers) expect(nextSnapshot(ready, a, ["m"], 2_000, false, 3).ready).toBe(false);
    });

    test("an endpoint not yet ready does not become ready by timing out; with a threshold of 1 one slow poll takes it out", () => {
      expect(nextSnapshot(INITIAL_SNAPSHOT, slow, ["m"], 2_000, false, 3).ready).toBe(false);
      const ready = nextSnapshot(INITIAL_SNAPSHOT, outcome({}), ["m"], 2_000, false, 1);
      expect(nextSnapshot(ready, slow, ["m"], 2_000, false, 1).ready).toBe(false);
    });
  });
});
