import { execFile } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../support/paths.js";
import { makeWorkDir, removeWorkDir } from "../support/work-dir.js";
import { helmBinary } from "./helm-binary.js";

const run = promisify(execFile);
const CHART = join(REPO_ROOT, "charts/clawgate");
const PRODUCTION_VALUES = join(CHART, "ci/production-values.yaml");
const TESTDATA = join(REPO_ROOT, "e2e/src/deploy/testdata");
const UPDATE_GOLDEN = process.env.UPDATE_GOLDEN === "1";

/** The binaries' default drain after SIGTERM; the chart must not shorten it by accident. */
const DRAIN_TIMEOUT_SECONDS = 10;
/** The data plane serves on this long after SIGTERM, while Kubernetes removes its endpoint. */
const DRAIN_DELAY_SECONDS = 5;

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are free-form YAML
type Manifest = Record<string, any>;

interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

let helm: string;
let workDir: string;

async function runHelm(args: string[]): Promise<HelmResult> {
  try {
    const { stdout, stderr } = await run(helm, args, { maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const failed = err as { code?: number; stdout?: string; stderr?: string };
    return { code: failed.code ?? 1, stdout: failed.stdout ?? "", stderr: failed.stderr ?? "" };
  }
}

async function template(namespace: string, ...args: string[]): Promise<string> {
  const result = await runHelm(["template", "clawgate", CHART, "--namespace", namespace, ...args]);
  expect(result.stderr).toBe("");
  expect(result.code).toBe(0);
  return result.stdout;
}

function manifests(text: string): Manifest[] {
  return parseAllDocuments(text)
    .map((doc) => doc.toJS() as Manifest | null)
    .filter((doc): doc is Manifest => doc !== null);
}

function find(docs: Manifest[], kind: string, name: string): Manifest {
  const doc = docs.find((d) => d.kind === kind && d.metadata?.name === name);
  if (doc === undefined) throw new Error(`no ${kind} ${name} rendered`);
  return doc;
}

/**
 * The chart-created admin token and snapshot-stream certificates are random on every render
 * (nothing to look up without a cluster), so their values are masked before comparing with the
 * golden file; the tests below and helm-chart-tls.test.ts check the real values separately.
 */
function maskGenerated(text: string): string {
  return text
    .split(/^(?=---$)/m)
    .map((doc) => {
      if (doc.includes("# Source: clawgate/templates/control-plane-secret.yaml"))
        return doc.replace(/^(\s+token: ).+$/m, "$1<generated>");
      if (doc.includes("# Source: clawgate/templates/snapshot-tls-secret.yaml"))
        return doc.replace(/^(\s+(?:ca\.crt|tls\.crt|tls\.key): ).+$/gm, "$1<generated>");
      return doc;
    })
    .join("");
}

async function matchesGolden(name: string, text: string): Promise<void> {
  const path = join(TESTDATA, `${name}.golden.yaml`);
  if (UPDATE_GOLDEN) await writeFile(path, text);
  const golden = await readFile(path, "utf8").catch(() => {
    throw new Error(`${path} is missing; run with UPDATE_GOLDEN=1 to create it`);
  });
  // A plain equality keeps the failure diff readable line by line.
  expect(text, `${name} differs from its golden file; UPDATE_GOLDEN=1 regenerates it`).toBe(golden);
}

const renders: Record<"default" | "production", { text: string; docs: Manifest[] }> = {
  default: { text: "", docs: [] },
  production: { text: "", docs: [] },
};

beforeAll(async () => {
  helm = await helmBinary();
  workDir = await makeWorkDir("helm");
  // --api-versions stands in for a cluster with the Prometheus Operator's CRDs; the production
  // values set monitoring.assumeCRDsInstalled instead, so both gates are exercised.
  const [defaults, production] = await Promise.all([
    template("clawgate", "--api-versions", "monitoring.coreos.com/v1"),
    template("gateway", "--values", PRODUCTION_VALUES),
  ]);
  renders.default = { text: defaults, docs: manifests(defaults) };
  renders.production = { text: production, docs: manifests(production) };
});

afterAll(() => removeWorkDir(workDir));

describe("helm lint", () => {
  it.each([
    ["default values", []],
    ["production values", ["--values", PRODUCTION_VALUES]],
  ])("passes --strict with %s", async (_label, args) => {
    const result = await runHelm(["lint", "--strict", CHART, ...args]);
    expect(result.stdout).toContain("0 chart(s) failed");
    expect(result.code).toBe(0);
  });
});

describe("helm template", () => {
  it("renders the default values as in the golden file", async () => {
    await matchesGolden("default", maskGenerated(renders.default.text));
  });

  it("renders the production values as in the golden file", async () => {
    await matchesGolden("production", renders.production.text);
  });

  it("generates a 40-character admin token when no Secret is given", () => {
    const secret = find(renders.default.docs, "Secret", "clawgate-control-plane-admin-token");
    const token = Buffer.from(secret.data.token, "base64").toString("utf8");
    expect(token).toMatch(/^[A-Za-z0-9]{40}$/);
  });

  it("uses the existing Secrets and creates none in production", () => {
    const { docs } = renders.production;
    expect(docs.filter((d) => d.kind === "Secret")).toEqual([]);
    const cp = find(docs, "Deployment", "clawgate-control-plane").spec.template.spec;
    const volume = cp.volumes.find((v: Manifest) => v.name === "admin-token");
    expect(volume.secret.secretName).toBe("clawgate-admin");
    const monitor = find(docs, "ServiceMonitor", "clawgate-control-plane");
    expect(monitor.spec.endpoints[0].authorization.credentials).toEqual({
      name: "clawgate-admin",
      key: "token",
    });
  });

  it("renders the ServiceMonitor and PrometheusRule only where the CRDs are known", async () => {
    const kinds = (text: string) => new Set(manifests(text).map((d) => d.kind));
    const without = kinds(await template("clawgate"));
    expect(without.has("ServiceMonitor")).toBe(false);
    expect(without.has("PrometheusRule")).toBe(false);
    const assumed = kinds(
      await template("clawgate", "--set", "monitoring.assumeCRDsInstalled=true"),
    );
    expect(assumed.has("ServiceMonitor")).toBe(true);
    expect(assumed.has("PrometheusRule")).toBe(true);
  });
});

describe("values.schema.json", () => {
  it.each([
    ["controlPlane:\n  replicas: two\n", "/controlPlane/replicas"],
    ["dataPlane:\n  autoscaling:\n    maxReplicas: -1\n", "/dataPlane/autoscaling/maxReplicas"],
    ["dataPlane:\n  replica: 3\n", "replica"],
    ["etcd:\n  endpoints: []\n", "/etcd/endpoints"],
    ["listenAddress: 127.0.0.1\n", "/listenAddress"],
    ["dataPlane:\n  workers: 0\n", "/dataPlane/workers"],
    ["dataPlane:\n  workers: all\n", "/dataPlane/workers"],
  ])("rejects %j naming %s", async (values, field) => {
    const file = join(workDir, "bad-values.yaml");
    await writeFile(file, values);
    const result = await runHelm(["template", "clawgate", CHART, "--values", file]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toContain(field);
  });

  it.each([
    ["controlPlane", 10, "controlPlane.drainTimeoutSeconds (10)"],
    ["dataPlane", 10, "dataPlane.drainDelaySeconds + dataPlane.drainTimeoutSeconds (5 + 10 = 15)"],
    // Above the drain alone, but not above the drain delay plus the drain.
    ["dataPlane", 15, "dataPlane.drainDelaySeconds + dataPlane.drainTimeoutSeconds (5 + 10 = 15)"],
  ])(
    "rejects a %s grace period of %i s that does not exceed its stop time",
    async (plane, grace, stop) => {
      const result = await runHelm([
        ...["template", "clawgate", CHART],
        ...["--set", `${plane}.terminationGracePeriodSeconds=${grace}`],
      ]);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toContain(
        `${plane}.terminationGracePeriodSeconds (${grace}) must exceed ${stop}`,
      );
    },
  );

  it("accepts a data-plane grace period just above the drain delay plus the drain", async () => {
    const result = await runHelm([
      ...["template", "clawgate", CHART],
      ...["--set", "dataPlane.terminationGracePeriodSeconds=16"],
    ]);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  });
});

describe.each(["default", "production"] as const)("rendered data plane (%s values)", (which) => {
  const pod = () =>
    find(renders[which].docs, "Deployment", "clawgate-data-plane").spec.template.spec as Manifest;
  const container = () => pod().containers.find((c: Manifest) => c.name === "data-plane");
  const env = (name: string) =>
    container().env.find((e: Manifest) => e.name === name)?.value as string | undefined;
  const adminPort = () =>
    container().ports.find((p: Manifest) => p.name === "admin").containerPort as number;

  it("probes readiness on /readyz and liveness on /healthz of the admin listener", () => {
    const { readinessProbe, livenessProbe } = container();
    expect(readinessProbe.httpGet).toEqual({ path: "/readyz", port: "admin" });
    expect(livenessProbe.httpGet).toEqual({ path: "/healthz", port: "admin" });
    // The named port is the one the process listens on, and not on loopback, or the kubelet
    // could never reach it.
    expect(env("CLAWGATE_DP_ADMIN_LISTEN")).toBe(`0.0.0.0:${adminPort()}`);
  });

  it("drains on SIGTERM alone, after a delay, within a grace period above both", () => {
    const drainMs = Number(env("CLAWGATE_DRAIN_TIMEOUT_MS"));
    const delayMs = Number(env("CLAWGATE_DRAIN_DELAY_MS"));
    expect(drainMs).toBeGreaterThanOrEqual(DRAIN_TIMEOUT_SECONDS * 1000);
    expect(delayMs).toBe(DRAIN_DELAY_SECONDS * 1000);
    expect(pod().terminationGracePeriodSeconds * 1000).toBeGreaterThan(delayMs + drainMs);
    expect(container().lifecycle?.preStop).toBeUndefined();
  });

  it("runs non-root on a read-only root file system without capabilities", () => {
    expect(pod().securityContext.runAsNonRoot).toBe(true);
    const security = container().securityContext;
    expect(security.readOnlyRootFilesystem).toBe(true);
    expect(security.allowPrivilegeEscalation).toBe(false);
    expect(security.capabilities.drop).toEqual(["ALL"]);
    expect(container().resources.requests.cpu).toBeDefined();
  });

  it("keeps the snapshot cache in an emptyDir at CLAWGATE_CACHE_DIR", () => {
    const mount = container().volumeMounts.find((m: Manifest) => m.name === "snapshot-cache");
    expect(mount.mountPath).toBe(env("CLAWGATE_CACHE_DIR"));
    const volume = pod().volumes.find((v: Manifest) => v.name === "snapshot-cache");
    expect(volume.emptyDir).toBeDefined();
  });

  it("streams from the control plane's gRPC Service", () => {
    const service = find(renders[which].docs, "Service", "clawgate-control-plane");
    const grpc = service.spec.ports.find((p: Manifest) => p.name === "grpc");
    expect(env("CLAWGATE_CP_ADDRESSES")).toBe(`clawgate-control-plane:${grpc.port}`);
  });
});

describe("dataPlane.workers", () => {
  const workersEnv = (text: string) => {
    const deployment = find(manifests(text), "Deployment", "clawgate-data-plane");
    const container = deployment.spec.template.spec.containers[0] as Manifest;
    return container.env.find((e: Manifest) => e.name === "CLAWGATE_WORKERS")?.value;
  };

  it("runs one proxy process by default, and the production values two on two requested cores", () => {
    expect(workersEnv(renders.default.text)).toBe("1");
    expect(workersEnv(renders.production.text)).toBe("2");
    const production = find(renders.production.docs, "Deployment", "clawgate-data-plane");
    expect(production.spec.template.spec.containers[0].resources.requests.cpu).toBe("2");
  });

  it.each([
    ["4", "4"],
    ["auto", "auto"],
  ])("passes workers=%s to the data plane as CLAWGATE_WORKERS=%s", async (value, env) => {
    const text = await template("clawgate", "--set", `dataPlane.workers=${value}`);
    expect(workersEnv(text)).toBe(env);
  });
});

describe("rendered control plane", () => {
  it("probes readiness on /readyz and liveness on /healthz, neither needing the token", () => {
    const deployment = find(renders.default.docs, "Deployment", "clawgate-control-plane");
    const container = deployment.spec.template.spec.containers[0];
    expect(container.readinessProbe.httpGet).toEqual({ path: "/readyz", port: "admin" });
    expect(container.livenessProbe.httpGet).toEqual({ path: "/healthz", port: "admin" });
  });

  it("runs 2 replicas against the external etcd with listeners off loopback", () => {
    const deployment = find(renders.production.docs, "Deployment", "clawgate-control-plane");
    expect(deployment.spec.replicas).toBe(2);
    const container = deployment.spec.template.spec.containers[0];
    const env = Object.fromEntries(container.env.map((e: Manifest) => [e.name, e.value]));
    expect(env.CLAWGATE_ETCD_ENDPOINTS.split(",")).toHaveLength(3);
    expect(env.CLAWGATE_ADMIN_LISTEN).toBe("0.0.0.0:9180");
    expect(env.CLAWGATE_GRPC_LISTEN).toBe("0.0.0.0:9190");
    const mount = container.volumeMounts.find((m: Manifest) => m.name === "admin-token");
    expect(env.CLAWGATE_ADMIN_TOKEN_FILE).toBe(`${mount.mountPath}/token`);
  });

  it("points the default etcd endpoint at a bitnami etcd release named <release>-etcd", () => {
    const deployment = find(renders.default.docs, "Deployment", "clawgate-control-plane");
    const env = deployment.spec.template.spec.containers[0].env;
    const endpoints = env.find((e: Manifest) => e.name === "CLAWGATE_ETCD_ENDPOINTS").value;
    expect(endpoints).toBe("http://clawgate-etcd:2379");
  });
});

describe("production scaling", () => {
  it("autoscales the data plane 3..20 on CPU and leaves replicas to the HPA", () => {
    const { docs } = renders.production;
    const hpa = find(docs, "HorizontalPodAutoscaler", "clawgate-data-plane");
    expect(hpa.apiVersion).toBe("autoscaling/v2");
    expect([hpa.spec.minReplicas, hpa.spec.maxReplicas]).toEqual([3, 20]);
    expect(hpa.spec.metrics[0].resource.name).toBe("cpu");
    expect(find(docs, "Deployment", "clawgate-data-plane").spec.replicas).toBeUndefined();
    expect(find(docs, "PodDisruptionBudget", "clawgate-data-plane").spec.maxUnavailable).toBe(1);
  });
});

describe("alerts and dashboard", () => {
  it("alerts on what did not heal", () => {
    const rule = find(renders.default.docs, "PrometheusRule", "clawgate");
    const alerts = new Map<string, Manifest>(
      rule.spec.groups.flatMap((g: Manifest) => g.rules).map((r: Manifest) => [r.alert, r]),
    );
    const expectAlert = (name: string, expr: RegExp, forDuration?: string) => {
      const alert = alerts.get(name);
      expect(alert, name).toBeDefined();
      expect(alert!.expr).toMatch(expr);
      expect(alert!.for).toBe(forDuration);
    };
    expectAlert(
      "ClawgateDataPlaneStaleOrNacked",
      /clawgate_dataplanes\{.*state=~"STALE\|NACKED"\}\) > 0/,
      "5m",
    );
    expectAlert("ClawgateSnapshotNacked", /increase\(clawgate_snapshot_nacks_total\{/);
    expectAlert("ClawgateBreakerOpen", /clawgate_breaker_state\{.*== 2$/, "5m");
    expectAlert("ClawgateNodeStillEvicted", /clawgate_upstream_node_healthy\{.*== 0$/, "10m");
    expectAlert("ClawgateRemediationFailing", /clawgate_heal_actions_total\{.*result="failed"/);
    expectAlert("ClawgateControlPlaneNotPublishing", /clawgate_snapshot_published\{/, "10m");
    expectAlert(
      "ClawgateQuotaStoreFailing",
      /increase\(clawgate_quota_store_errors_total\{.*\[5m\]\)\) > 0$/,
      "10m",
    );
  });

  it("ships the dashboard file as a labelled ConfigMap with every panel's metric", async () => {
    const file = await readFile(join(CHART, "dashboards/clawgate.json"), "utf8");
    const configMap = find(renders.default.docs, "ConfigMap", "clawgate-dashboard");
    expect(configMap.metadata.labels.grafana_dashboard).toBe("1");
    expect(configMap.data["clawgate.json"]).toBe(file.trimEnd());
    const dashboard = JSON.parse(file) as { panels: { targets: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)).join("\n");
    for (const metric of [
      "clawgate_snapshot_version",
      "clawgate_dataplanes",
      "clawgate_breaker_state",
      "clawgate_upstream_node_healthy",
      "clawgate_requests_total",
      "clawgate_request_duration_seconds_bucket",
      "clawgate_heal_actions_total",
      "clawgate_tenant_requests_total",
      "clawgate_quota_exhausted_total",
      "clawgate_quota_store_errors_total",
    ]) {
      expect(exprs).toContain(metric);
    }
  });
});
