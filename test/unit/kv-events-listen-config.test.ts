/** `kv_events.listen` and `endpoints[].kv_events.topic`: the bound-socket topology's keys, and the clear errors its mistakes get. */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load.ts";
import { issuesOf } from "../helpers/config-issues.ts";

const endpoint = (id: string, kv_events: Record<string, unknown>) => ({ id, url: `http://${id}:8000`, models: ["m"], kv_events });

describe("kv_events.listen and endpoints[].kv_events.topic", () => {
  test("engines that connect: a bound socket and a topic each", () => {
    const c = buildConfig({
      kv_events: { listen: "tcp://*:5557" },
      endpoints: [
        endpoint("a", { topic: "kv@10.0.0.5@meta-llama/Llama-3.1-8B-Instruct", replay_endpoint: "tcp://10.0.0.5:5558" }),
        endpoint("b", { topic: "kv@pod-b@meta-llama/Llama-3.1-8B-Instruct" }),
        // Both topologies side by side: this engine binds and the gateway connects.
        endpoint("c", { endpoint: "tcp://10.0.0.7:5557", topic: "kv" }),
      ],
    });
    expect(c.kvEvents.listen).toBe("tcp://*:5557");
    expect(c.kvEvents.listenMaxPublishers).toBe(256);
    expect(c.endpoints.map((e) => e.kvEvents)).toEqual([
      { endpoint: null, replayEndpoint: "tcp://10.0.0.5:5558", topic: "kv@10.0.0.5@meta-llama/Llama-3.1-8B-Instruct" },
      { endpoint: null, replayEndpoint: null, topic: "kv@pod-b@meta-llama/Llama-3.1-8B-Instruct" },
      { endpoint: "tcp://10.0.0.7:5557", replayEndpoint: null, topic: "kv" },
    ]);
    expect(buildConfig({}).kvEvents.listen).toBeNull();
  });

  test("a topic without kv_events.listen names both keys", () => {
    expect(issuesOf(() => buildConfig({ endpoints: [endpoint("a", { topic: "kv@a@m" })] }))).toEqual([
      "endpoints[0].kv_events: without an endpoint to connect to, the engine connects to the gateway: set kv_events.listen (e.g. tcp://*:5557)",
    ]);
  });

  test("two endpoints with the same topic: an error naming the second's key and the first", () => {
    const issues = issuesOf(() =>
      buildConfig({ kv_events: { listen: "tcp://*:5557" }, endpoints: [endpoint("a", { topic: "kv@p@m" }), endpoint("b", { topic: "kv@p@m" })] }),
    );
    expect(issues).toEqual(["endpoints[1].kv_events.topic: 'kv@p@m' is already endpoints[0].kv_events.topic (each engine needs a topic of its own)"]);
  });

  test("no topic at all on the bound socket is refused (it is all that tells engines apart)", () => {
    const issues = issuesOf(() => buildConfig({ kv_events: { listen: "tcp://*:5557" }, endpoints: [endpoint("a", {})] }));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toStartWith("endpoints[0].kv_events.topic: expected the engine's topic");
  });

  test("hostile topics: odd characters and overlong ones name the key", () => {
    for (const topic of ["kv@pod 1@m", "kv@pod@m\n", 'kv@"pod"@m', "kv@pöd@m", "kv@pod@m\u0000", "kv*", "x".repeat(513)]) {
      const issues = issuesOf(() => buildConfig({ kv_events: { listen: "tcp://*:5557" }, endpoints: [endpoint("a", { topic })] }));
      expect(issues).toHaveLength(1);
      expect(issues[0]).toStartWith("endpoints[0].kv_events.topic:");
    }
  });

  test("listen must be a tcp:// address to bind with a fixed port", () => {
    for (const listen of ["tcp://*:0", "tcp://*", "ipc:///tmp/kv", "tcp://*:70000", "*:5557", "tcp://a b:5557"]) {
      const issues = issuesOf(() => buildConfig({ kv_events: { listen } }));
      expect(issues).toHaveLength(1);
      expect(issues[0]).toStartWith("kv_events.listen:");
    }
    for (const listen of ["tcp://0.0.0.0:5557", "tcp://127.0.0.1:5557", "tcp://[::]:5557", "tcp://router:5557"])
      expect(buildConfig({ kv_events: { listen } }).kvEvents.listen).toBe(listen);
    expect(issuesOf(() => buildConfig({ kv_events: { listen: "tcp://*:5557", listen_max_publishers: 0 } }))[0]).toStartWith("kv_events.listen_max_publishers:");
  });
});
