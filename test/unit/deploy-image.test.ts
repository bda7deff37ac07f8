/**
 * The container image (Dockerfile, .dockerignore, deploy/image/) and the
 * Kubernetes manifests that run it agree: the workloads run the image the
 * build script names with the entrypoint the systemd units and the image use,
 * the probes reach the HEALTHCHECK's route, the gateway runs as the image's
 * non-root user, the image's default config loads, and the kustomization
 * puts every object in a Namespace it creates — read offline from the files,
 * and as `kubectl kustomize` renders them.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { parseConfigText } from "../../src/config/load.ts";
import { REPO_ROOT } from "../helpers/processes.ts";
import { runTool, testWithTool } from "../helpers/system-tools.ts";

const read = (...path: string[]) => readFileSync(join(REPO_ROOT, ...path), "utf8");

interface Probe {
  httpGet: { path: string; port: string | number };
}
interface Container {
  image: string;
  imagePullPolicy?: string;
  command: string[];
  ports: { name: string; containerPort: number }[];
  livenessProbe?: Probe;
  startupProbe?: Probe;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; runAsGroup?: number; allowPrivilegeEscalation?: boolean; capabilities?: { drop?: string[] } };
}
interface K8sObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec?: { template?: { spec: { securityContext?: { runAsNonRoot?: boolean; runAsUser?: number }; containers: Container[] } } };
  data?: Record<string, string>;
}

/** The Dockerfile's instructions, continuation lines joined, comments dropped. */
function dockerfileInstructions(text: string): { op: string; args: string }[] {
  const joined = text
    .split("\n")
    .filter((l) => !l.trimStart().startsWith("#"))
    .join("\n")
    .replace(/\\\n/g, " ");
  return joined
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "")
    .map((l) => {
      const [op, ...rest] = l.split(/\s+/);
      return { op: op!.toUpperCase(), args: rest.join(" ") };
    });
}

const dockerfile = dockerfileInstructions(read("Dockerfile"));
const lastStage = dockerfile.slice(dockerfile.findLastIndex((i) => i.op === "FROM"));
const instruction = (op: string) => {
  const found = lastStage.filter((i) => i.op === op);
  if (found.length !== 1) throw new Error(`the Dockerfile's last stage has ${found.length} ${op} instructions, expected 1`);
  return found[0]!.args;
};
const entrypoint = JSON.parse(instruction("ENTRYPOINT")) as string[];
const healthcheck = instruction("HEALTHCHECK");
const healthcheckCmd = JSON.parse(healthcheck.slice(healthcheck.indexOf("CMD ") + 4)) as string[];
const healthUrl = new URL(/'(http:\/\/[^']+)'/.exec(healthcheckCmd.join(" "))![1]!);
const imageUser = instruction("USER");
const imageEnv = Object.fromEntries([...instruction("ENV").matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!]));

const version = (JSON.parse(read("package.json")) as { version: string }).version;
/** The name deploy/image/build.sh gives the image by default. */
const builtImage = /^tag="([^"]+)"$/m.exec(read("deploy", "image", "build.sh"))![1]!.replace("$version", version);

const kustomization = parseYaml(read("deploy", "k8s", "kustomization.yaml")) as { namespace: string; resources: string[] };
const objects: K8sObject[] = kustomization.resources.flatMap((f) => parseAllDocuments(read("deploy", "k8s", f)).map((d) => d.toJS() as K8sObject));
const workload = (objs: K8sObject[], kind: string) => objs.find((o) => o.kind === kind)!;
/** Kinds here that are not namespaced. */
const CLUSTER_SCOPED = new Set(["Namespace"]);

/** The first ExecStart of a systemd unit, split into words (the units quote nothing). */
function execStart(unit: string): string[] {
  return /^ExecStart=(.+)$/m
    .exec(read("deploy", "systemd", unit))![1]!
    .trim()
    .split(/\s+/);
}

function probePort(c: Container, p: Probe): number | undefined {
  return typeof p.httpGet.port === "number" ? p.httpGet.port : c.ports.find((x) => x.name === p.httpGet.port)?.containerPort;
}

/** The checks that hold for the files as written and for kubectl kustomize's output alike. */
function checkRendered(objs: K8sObject[]): void {
  const namespaces = objs.filter((o) => o.kind === "Namespace").map((o) => o.metadata.name);
  expect(namespaces).toEqual([kustomization.namespace]);
  for (const o of objs)
    if (!CLUSTER_SCOPED.has(o.kind))
      expect(`${o.kind}/${o.metadata.name} in ${o.metadata.namespace ?? kustomization.namespace}`).toBe(
        `${o.kind}/${o.metadata.name} in ${kustomization.namespace}`,
      );
  for (const kind of ["Deployment", "DaemonSet"]) {
    const c = workload(objs, kind).spec!.template!.spec.containers[0]!;
    expect(c.image).toBe(builtImage);
    // A locally built image: the kubelet must not insist on pulling it.
    expect(["IfNotPresent", "Never"]).toContain(c.imagePullPolicy!);
    expect(c.command[0]).toBe(entrypoint[0]!);
  }
}

describe("the container image and deploy/k8s", () => {
  test("the image runs bin/llmgw as its entrypoint, the command the systemd units and the manifests run", () => {
    expect(entrypoint).toEqual(["/opt/llmgw/bin/llmgw"]);
    const gateway = workload(objects, "Deployment").spec!.template!.spec.containers[0]!;
    expect(gateway.command).toEqual(execStart("llmgw.service"));
    const agent = workload(objects, "DaemonSet").spec!.template!.spec.containers[0]!;
    expect(agent.command.slice(0, 2)).toEqual(execStart("llmgw-agent.service").slice(0, 2));
    // `serve` with no --config reads LLMGW_CONFIG: the image's default CMD.
    expect(JSON.parse(instruction("CMD"))).toEqual(["serve"]);
    expect(imageEnv.LLMGW_CONFIG).toBe("/etc/llmgw/llmgw.yaml");
  });

  test("the workloads run the image the build names, every object in the kustomization's Namespace", () => {
    expect(builtImage).toBe(`localhost/llmgw:${version}`);
    checkRendered(objects);
  });

  test("the gateway's probes reach the HEALTHCHECK's route, and it runs as the image's non-root user", () => {
    const pod = workload(objects, "Deployment").spec!.template!.spec;
    const gateway = pod.containers[0]!;
    for (const probe of [gateway.livenessProbe!, gateway.startupProbe!]) {
      expect(probe.httpGet.path).toBe(healthUrl.pathname);
      expect(probePort(gateway, probe)).toBe(Number(healthUrl.port));
    }
    const [uid, gid] = imageUser.split(":").map(Number);
    expect(uid).toBeGreaterThan(0);
    expect(pod.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid });
    expect(gateway.securityContext).toMatchObject({ runAsNonRoot: true, runAsUser: uid, runAsGroup: gid, allowPrivilegeEscalation: false });
    expect(gateway.securityContext?.capabilities?.drop).toEqual(["ALL"]);
  });

  test("the image's default config loads, opens the HEALTHCHECK's listener and keeps data_dir on the volume", () => {
    const config = parseConfigText(read("deploy", "image", "llmgw.yaml"), "deploy/image/llmgw.yaml");
    expect(config.metricsListen?.port).toBe(Number(healthUrl.port));
    expect(config.adminListen.host).toBe("127.0.0.1");
    expect(JSON.parse(instruction("VOLUME"))).toEqual([config.dataDir]);
    expect(imageEnv.LLMGW_DATA_DIR).toBe(config.dataDir);
  });

  test(".dockerignore lets in everything the Dockerfile copies from the context, and not node_modules", () => {
    const rules = read(".dockerignore")
      .split("\n")
      .map((l) => l.trim())
      .filter((l) => l !== "" && !l.startsWith("#"));
    expect(rules[0]).toBe("*");
    const allowed = rules.filter((r) => r.startsWith("!")).map((r) => r.slice(1).replace(/\/$/, ""));
    const sources = dockerfile.filter((i) => i.op === "COPY" && !i.args.startsWith("--from")).flatMap((i) => i.args.split(/\s+/).slice(0, -1));
    expect(sources.length).toBeGreaterThan(3);
    for (const s of sources) expect(`${s} ${allowed.includes(s.replace(/^\.\//, "").replace(/\/$/, "")) ? "copied" : "ignored"}`).toBe(`${s} copied`);
    expect(allowed.some((a) => a.startsWith("node_modules"))).toBe(false);
  });

  testWithTool("kubectl", "kubectl kustomize renders the same objects, all in the Namespace, with the image and entrypoint", async (kubectl) => {
    const { code, out } = await runTool(kubectl, ["kustomize", join(REPO_ROOT, "deploy", "k8s")]);
    expect(code).toBe(0);
    const rendered = parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
    const ids = (objs: K8sObject[]) => objs.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(ids(rendered)).toEqual(ids(objects));
    for (const o of rendered) if (!CLUSTER_SCOPED.has(o.kind)) expect(o.metadata.namespace).toBe(kustomization.namespace);
    checkRendered(rendered);
  });
});
