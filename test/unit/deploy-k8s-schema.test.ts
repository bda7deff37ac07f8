/**
 * deploy/k8s/ against a schema of the Kubernetes objects it uses, written
 * here from the API reference (kubernetes.io/docs/reference/kubernetes-api:
 * Namespace, Deployment, DaemonSet, Service, ConfigMap, PersistentVolumeClaim, and the
 * PodSpec, Container, Volume and Probe they hold) rather than vendored: the
 * fields each object requires, their types and enums, DNS-1123 names,
 * quantities and port ranges, every field strict so a misspelt key fails —
 * and the cross-references a schema alone cannot see: each volumeMount
 * names a volume of its pod, each PVC a pod mounts is in the kustomization,
 * a ReadWriteOnce data volume goes with the Recreate strategy.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { z } from "zod";
import { REPO_ROOT } from "../helpers/processes.ts";

const DIR = join(REPO_ROOT, "deploy", "k8s");
const dns1123 = z
  .string()
  .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
  .max(63);
const labels = z.record(z.string(), z.string());
const metadata = z.object({ name: dns1123, labels: labels.optional(), namespace: dns1123.optional() }).strict();
/** resource.Quantity: a number with an optional binary or decimal suffix. */
const quantity = z.union([z.number(), z.string().regex(/^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/)]);
const port = z.number().int().min(1).max(65535);
const portRef = z.union([
  port,
  z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/)
    .max(15),
]);
const probe = z
  .object({
    httpGet: z.object({ path: z.string().startsWith("/"), port: portRef }).strict(),
    periodSeconds: z.number().int().min(1).optional(),
    failureThreshold: z.number().int().min(1).optional(),
  })
  .strict();
const envVar = z
  .object({
    name: z.string().min(1),
    value: z.string().optional(),
    valueFrom: z
      .object({
        fieldRef: z.object({ fieldPath: z.string() }).strict().optional(),
        secretKeyRef: z.object({ name: dns1123, key: z.string() }).strict().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
const container = z
  .object({
    name: dns1123,
    image: z.string().min(1),
    imagePullPolicy: z.enum(["Always", "IfNotPresent", "Never"]).optional(),
    workingDir: z.string().optional(),
    command: z.array(z.string()).optional(),
    env: z.array(envVar).optional(),
    ports: z.array(z.object({ name: z.string().max(15).optional(), containerPort: port }).strict()).optional(),
    startupProbe: probe.optional(),
    livenessProbe: probe.optional(),
    readinessProbe: probe.optional(),
    resources: z
      .object({ requests: z.record(z.string(), quantity).optional(), limits: z.record(z.string(), quantity).optional() })
      .strict()
      .optional(),
    securityContext: z
      .object({
        runAsNonRoot: z.boolean().optional(),
        runAsUser: z.number().int().min(0).optional(),
        runAsGroup: z.number().int().min(0).optional(),
        allowPrivilegeEscalation: z.boolean().optional(),
        capabilities: z
          .object({ add: z.array(z.string()).optional(), drop: z.array(z.string()).optional() })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
    volumeMounts: z.array(z.object({ name: dns1123, mountPath: z.string().startsWith("/"), readOnly: z.boolean().optional() }).strict()).optional(),
  })
  .strict();
const volume = z
  .object({
    name: dns1123,
    configMap: z.object({ name: dns1123 }).strict().optional(),
    persistentVolumeClaim: z.object({ claimName: dns1123, readOnly: z.boolean().optional() }).strict().optional(),
    hostPath: z
      .object({
        path: z.string().startsWith("/"),
        type: z.enum(["", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket", "CharDevice", "BlockDevice"]).optional(),
      })
      .strict()
      .optional(),
  })
  .strict()
  .refine((v) => [v.configMap, v.persistentVolumeClaim, v.hostPath].filter((s) => s !== undefined).length === 1, "a volume has exactly one source");
const podSpec = z
  .object({
    containers: z.array(container).min(1),
    volumes: z.array(volume).optional(),
    nodeSelector: labels.optional(),
    tolerations: z
      .array(
        z
          .object({
            key: z.string(),
            operator: z.enum(["Exists", "Equal"]),
            value: z.string().optional(),
            effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]).optional(),
          })
          .strict(),
      )
      .optional(),
    runtimeClassName: dns1123.optional(),
    hostNetwork: z.boolean().optional(),
    hostPID: z.boolean().optional(),
    dnsPolicy: z.enum(["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"]).optional(),
    terminationGracePeriodSeconds: z.number().int().min(0).optional(),
    securityContext: z
      .object({
        runAsNonRoot: z.boolean().optional(),
        runAsUser: z.number().int().optional(),
        runAsGroup: z.number().int().optional(),
        fsGroup: z.number().int().optional(),
        seccompProfile: z
          .object({ type: z.enum(["RuntimeDefault", "Unconfined", "Localhost"]) })
          .strict()
          .optional(),
      })
      .strict()
      .optional(),
  })
  .strict();
const template = z.object({ metadata: z.object({ labels }).strict(), spec: podSpec }).strict();
const selector = z.object({ matchLabels: labels }).strict();
const workloadMeta = { apiVersion: z.literal("apps/v1"), metadata };
const deployment = z
  .object({
    ...workloadMeta,
    kind: z.literal("Deployment"),
    spec: z
      .object({
        replicas: z.number().int().min(0).optional(),
        strategy: z
          .object({ type: z.enum(["Recreate", "RollingUpdate"]) })
          .strict()
          .optional(),
        selector,
        template,
      })
      .strict(),
  })
  .strict();
const daemonSet = z
  .object({
    ...workloadMeta,
    kind: z.literal("DaemonSet"),
    spec: z
      .object({
        selector,
        template,
        updateStrategy: z
          .object({
            type: z.enum(["RollingUpdate", "OnDelete"]),
            rollingUpdate: z
              .object({ maxUnavailable: z.union([z.number(), z.string()]) })
              .strict()
              .optional(),
          })
          .strict()
          .optional(),
      })
      .strict(),
  })
  .strict();
const service = z
  .object({
    apiVersion: z.literal("v1"),
    kind: z.literal("Service"),
    metadata,
    spec: z
      .object({
        type: z.enum(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]).optional(),
        selector: labels,
        ports: z.array(z.object({ name: dns1123, port, targetPort: portRef }).strict()).min(1),
      })
      .strict(),
  })
  .strict();
const configMap = z.object({ apiVersion: z.literal("v1"), kind: z.literal("ConfigMap"), metadata, data: z.record(z.string(), z.string()) }).strict();
const pvc = z
  .object({
    apiVersion: z.literal("v1"),
    kind: z.literal("PersistentVolumeClaim"),
    metadata,
    spec: z
      .object({
        accessModes: z.array(z.enum(["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"])).min(1),
        resources: z.object({ requests: z.object({ storage: quantity }).strict() }).strict(),
        storageClassName: z.string().optional(),
      })
      .strict(),
  })
  .strict();
const namespace = z.object({ apiVersion: z.literal("v1"), kind: z.literal("Namespace"), metadata }).strict();
const SCHEMAS: Record<string, z.ZodType> = {
  Namespace: namespace,
  Deployment: deployment,
  DaemonSet: daemonSet,
  Service: service,
  ConfigMap: configMap,
  PersistentVolumeClaim: pvc,
};

type Doc = { kind: string; metadata: { name: string }; spec?: Record<string, unknown> };
const files = readdirSync(DIR).filter((f) => f.endsWith(".yaml") && f !== "kustomization.yaml");
const docs: { file: string; doc: Doc }[] = files.flatMap((file) =>
  parseAllDocuments(readFileSync(join(DIR, file), "utf8")).map((d) => ({ file, doc: d.toJS() as Doc })),
);

describe("deploy/k8s against the Kubernetes API's documented fields", () => {
  test("every object is of a known kind and passes its schema (required fields, types, enums, no unknown keys)", () => {
    const problems: string[] = [];
    for (const { file, doc } of docs) {
      const schema = SCHEMAS[doc.kind];
      if (!schema) {
        problems.push(`${file}: kind ${doc.kind} has no schema here`);
        continue;
      }
      const r = schema.safeParse(doc);
      if (!r.success) for (const i of r.error.issues) problems.push(`${file}: ${i.path.join(".")}: ${i.message}`);
    }
    expect(problems).toEqual([]);
  });

  test("the schema catches what it should (a missing image, a misspelt key, a bad quantity)", () => {
    const gw = structuredClone(docs.find((d) => d.doc.kind === "Deployment")!.doc) as unknown as {
      spec: { template: { spec: { containers: Record<string, unknown>[] } } };
    };
    delete gw.spec.template.spec.containers[0]!.image;
    expect(deployment.safeParse(gw).success).toBe(false);
    const claim = structuredClone(docs.find((d) => d.doc.kind === "PersistentVolumeClaim")!.doc) as unknown as { spec: Record<string, unknown> };
    expect(pvc.safeParse({ ...claim, spec: { ...claim.spec, acessModes: ["ReadWriteOnce"] } }).success).toBe(false);
    expect(pvc.safeParse({ ...claim, spec: { ...claim.spec, resources: { requests: { storage: "fifty gigs" } } } }).success).toBe(false);
  });

  test("mounts name volumes of their pod; the data_dir is on a claimed persistent volume; RWO data means Recreate", () => {
    const kustomized = readFileSync(join(DIR, "kustomization.yaml"), "utf8");
    const claims = new Map(docs.filter((d) => d.doc.kind === "PersistentVolumeClaim").map((d) => [d.doc.metadata.name, d] as const));
    for (const { file, doc } of docs.filter((d) => d.doc.kind === "Deployment" || d.doc.kind === "DaemonSet")) {
      const pod = (doc.spec as { template: { spec: z.infer<typeof podSpec> } }).template.spec;
      const names = new Set((pod.volumes ?? []).map((v) => v.name));
      for (const c of pod.containers)
        for (const m of c.volumeMounts ?? []) expect(`${file}: ${m.name} ${names.has(m.name) ? "exists" : "missing"}`).toBe(`${file}: ${m.name} exists`);
      for (const v of pod.volumes ?? []) {
        if (!v.persistentVolumeClaim) continue;
        const claim = claims.get(v.persistentVolumeClaim.claimName);
        expect(claim).toBeDefined();
        expect(kustomized).toContain(claim!.file);
        const rwo = (claim!.doc.spec as { accessModes: string[] }).accessModes.includes("ReadWriteOnce");
        if (rwo && doc.kind === "Deployment") expect((doc.spec as { strategy?: { type: string } }).strategy?.type).toBe("Recreate");
      }
    }
    // The gateway's data_dir is where the claim is mounted.
    const gw = docs.find((d) => d.doc.kind === "Deployment")!.doc.spec as { template: { spec: z.infer<typeof podSpec> } };
    const dataMount = gw.template.spec.containers[0]!.volumeMounts!.find(
      (m) => gw.template.spec.volumes!.find((v) => v.name === m.name)?.persistentVolumeClaim,
    );
    const config = (docs.find((d) => d.doc.kind === "ConfigMap")!.doc as unknown as { data: Record<string, string> }).data["llmgw.yaml"]!;
    expect(config).toMatch(new RegExp(`^\\s*data_dir: ${dataMount!.mountPath}\\s*$`, "m"));
  });
});
