/**
 * deploy/k8s/ checked offline, as far as that goes without a cluster: every
 * manifest parses and is listed in the kustomization; selectors match pod
 * labels; the Service and the probes name container ports that exist; the
 * ConfigMap's config loads with llmgw's own loader, uses only keys of the
 * example config, and its listeners are the ports the pod exposes and probes
 * (/healthz, /readyz on the metrics listener); the commands parse with the
 * CLI's own flag specs; the agent runs on GPU nodes with its token from a Secret.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { agentCommand } from "../../src/agent/command.ts";
import { parseConfigText } from "../../src/config/load.ts";
import { serveCommand } from "../../src/serve/serve-command.ts";
import { parseCommandArgs } from "../../src/shared/flags.ts";
import { REPO_ROOT } from "../helpers/processes.ts";

const DIR = join(REPO_ROOT, "deploy", "k8s");

interface Port {
  name: string;
  containerPort: number;
}
interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  name: string;
  command: string[];
  ports: Port[];
  env?: { name: string; valueFrom?: { secretKeyRef?: { name: string; key: string } } }[];
  startupProbe?: Probe;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  volumeMounts?: { name: string; mountPath: string }[];
}
interface PodSpec {
  containers: Container[];
  volumes?: { name: string; configMap?: { name: string } }[];
  nodeSelector?: Record<string, string>;
  hostPID?: boolean;
  hostNetwork?: boolean;
}
interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  spec?: {
    selector?: { matchLabels?: Record<string, string> } & Record<string, string>;
    template?: { metadata: { labels: Record<string, string> }; spec: PodSpec };
    ports?: { name: string; port: number; targetPort: string | number }[];
  };
  data?: Record<string, string>;
}

const files = readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
const manifests: Manifest[] = files.flatMap((f) =>
  parseAllDocuments(readFileSync(join(DIR, f), "utf8")).map((d) => {
    if (d.errors.length > 0) throw new Error(`deploy/k8s/${f}: ${d.errors.map((e) => e.message).join("; ")}`);
    return d.toJS() as Manifest;
  }),
);
const one = (kind: string, name: string): Manifest => {
  const m = manifests.find((x) => x.kind === kind && x.metadata.name === name);
  if (!m) throw new Error(`no ${kind} ${name} in deploy/k8s`);
  return m;
};
const gateway = one("Deployment", "llmgw");
const service = one("Service", "llmgw");
const configMap = one("ConfigMap", "llmgw-config");
const agent = one("DaemonSet", "llmgw-agent");
const gatewayPod = gateway.spec!.template!.spec;
const gatewayContainer = gatewayPod.containers[0]!;
const agentContainer = agent.spec!.template!.spec.containers[0]!;

/** A probe's port as a number (named ports resolved against the container). */
function probePort(c: Container, p: Probe | undefined): number | undefined {
  if (!p) return undefined;
  const port = p.httpGet.port;
  return typeof port === "number" ? port : c.ports.find((x) => x.name === port)?.containerPort;
}

/** Every key path of a YAML value (array elements collapsed to `[]`). */
function keyPaths(v: unknown, prefix = ""): string[] {
  if (Array.isArray(v)) return v.flatMap((e) => keyPaths(e, `${prefix}[]`));
  if (v !== null && typeof v === "object") return Object.entries(v).flatMap(([k, e]) => [`${prefix}.${k}`, ...keyPaths(e, `${prefix}.${k}`)]);
  return [];
}

describe("deploy/k8s", () => {
  test("every manifest is listed in the kustomization and well formed", () => {
    const kustomization = parseYaml(readFileSync(join(DIR, "kustomization.yaml"), "utf8")) as { resources: string[] };
    expect([...kustomization.resources].sort()).toEqual([...files].sort());
    for (const m of manifests) {
      expect(typeof m.apiVersion).toBe("string");
      expect(m.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
    for (const w of [gateway, agent]) expect(w.spec!.template!.metadata.labels).toMatchObject(w.spec!.selector!.matchLabels!);
  });

  test("the ConfigMap's config loads, uses only keys of the example config, and matches the pod's ports and probes", () => {
    const text = configMap.data!["llmgw.yaml"]!;
    const config = parseConfigText(text, "deploy/k8s llmgw-config");
    const example = parseYaml(readFileSync(join(REPO_ROOT, "config", "llmgw.example.yaml"), "utf8")) as unknown;
    const known = new Set(keyPaths(example));
    expect(keyPaths(parseYaml(text)).filter((p) => !known.has(p))).toEqual([]);

    const port = (name: string) => gatewayContainer.ports.find((p) => p.name === name)?.containerPort;
    expect(config.listen.port).toBe(port("api")!);
    expect(config.metricsListen?.port).toBe(port("metrics")!);
    // Probes reach the metrics listener, which serves health on all interfaces;
    // the admin API stays on loopback, out of the pod's ports.
    expect(config.metricsListen?.host).toBe("0.0.0.0");
    expect(config.adminListen.host).toBe("127.0.0.1");
    expect(gatewayContainer.ports.map((p) => p.containerPort)).not.toContain(config.adminListen.port);
    expect(gatewayContainer.readinessProbe?.httpGet.path).toBe("/readyz");
    expect(gatewayContainer.livenessProbe?.httpGet.path).toBe("/healthz");
    for (const probe of [gatewayContainer.startupProbe, gatewayContainer.livenessProbe, gatewayContainer.readinessProbe]) {
      expect(probePort(gatewayContainer, probe)).toBe(config.metricsListen!.port);
    }
  });

  test("the gateway runs `serve` on the mounted ConfigMap; the Service targets its ports", () => {
    const [, sub, ...args] = gatewayContainer.command;
    expect(sub).toBe("serve");
    const parsed = parseCommandArgs(serveCommand, args);
    const configPath = String(parsed.values.config);
    const mount = gatewayContainer.volumeMounts!.find((m) => configPath.startsWith(`${m.mountPath}/`))!;
    expect(gatewayPod.volumes!.find((v) => v.name === mount.name)?.configMap?.name).toBe("llmgw-config");
    expect(configPath.slice(mount.mountPath.length + 1)).toBe("llmgw.yaml");
    expect(service.spec!.selector).toEqual(gateway.spec!.template!.metadata.labels);
    for (const p of service.spec!.ports!) expect(gatewayContainer.ports.map((c) => c.name)).toContain(String(p.targetPort));
  });

  test("the agent: GPU nodes, host pid namespace, token from a Secret, flags the CLI accepts, probe on its listen port", () => {
    const pod = agent.spec!.template!.spec;
    expect(pod.nodeSelector).toEqual({ "nvidia.com/gpu.present": "true" });
    expect(pod.hostPID).toBe(true);
    const [, sub, ...args] = agentContainer.command;
    expect(sub).toBe("agent");
    const parsed = parseCommandArgs(agentCommand, args);
    expect(parsed.values.token).toBeUndefined(); // never on the command line
    const listenPort = Number(String(parsed.values.listen).split(":").pop());
    expect(agentContainer.ports.find((p) => p.name === "agent")?.containerPort).toBe(listenPort);
    expect(probePort(agentContainer, agentContainer.livenessProbe)).toBe(listenPort);
    expect(agentContainer.livenessProbe?.httpGet.path).toBe("/health");
    expect(agentContainer.env?.find((e) => e.name === "LLMGW_AGENT_TOKEN")?.valueFrom?.secretKeyRef).toEqual({ name: "llmgw-agent-token", key: "token" });
    expect(agentContainer.volumeMounts?.map((m) => m.mountPath)).toContain(String(parsed.values["state-dir"]));
  });
});
