import { execFile } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { REPO_ROOT } from "../support/paths.js";
import { helmBinary } from "./helm-binary.js";

const run = promisify(execFile);
const CHART = join(REPO_ROOT, "charts/clawgate");

// biome-ignore lint/suspicious/noExplicitAny: rendered manifests are free-form YAML
type Manifest = Record<string, any>;

let helm: string;
beforeAll(async () => {
  helm = await helmBinary();
});

async function render(
  ...sets: string[]
): Promise<{ code: number; docs: Manifest[]; stderr: string }> {
  const args = ["template", "clawgate", CHART, ...sets.flatMap((set) => ["--set", set])];
  try {
    const { stdout, stderr } = await run(helm, args, { maxBuffer: 16 * 1024 * 1024 });
    const docs = parseAllDocuments(stdout)
      .map((doc) => doc.toJS() as Manifest | null)
      .filter((doc): doc is Manifest => doc !== null);
    return { code: 0, docs, stderr };
  } catch (error) {
    const failed = error as { code?: number; stderr?: string };
    return { code: failed.code ?? 1, docs: [], stderr: failed.stderr ?? "" };
  }
}

/** The named Deployment's container: its env as a map, its mounts and the pod's volumes. */
function plane(docs: Manifest[], name: string) {
  const pod = docs.find((d) => d.kind === "Deployment" && d.metadata.name === name)?.spec.template
    .spec as Manifest;
  const container = pod.containers[0] as Manifest;
  return {
    env: Object.fromEntries(container.env.map((e: Manifest) => [e.name, e.value])) as Record<
      string,
      string | undefined
    >,
    mount: container.volumeMounts.find((m: Manifest) => m.name === "snapshot-tls") as
      | Manifest
      | undefined,
    volume: pod.volumes.find((v: Manifest) => v.name === "snapshot-tls") as Manifest | undefined,
  };
}

/** The PEM files of a rendered Secret, decoded. */
function secretFiles(docs: Manifest[], name: string): Record<string, string> {
  const secret = docs.find((d) => d.kind === "Secret" && d.metadata.name === name);
  if (secret === undefined) throw new Error(`no Secret ${name} rendered`);
  return Object.fromEntries(
    Object.entries(secret.data as Record<string, string>).map(([key, value]) => [
      key,
      Buffer.from(value, "base64").toString("utf8"),
    ]),
  );
}

describe("chart tls values", () => {
  it("secure the snapshot stream with mutual TLS by default, each plane with its own Secret", async () => {
    const { docs } = await render();
    const cp = plane(docs, "clawgate-control-plane");
    const dp = plane(docs, "clawgate-data-plane");
    expect(cp.volume?.secret.secretName).toBe("clawgate-control-plane-tls");
    expect(dp.volume?.secret.secretName).toBe("clawgate-data-plane-tls");
    const dir = cp.mount?.mountPath;
    expect(cp.env).toMatchObject({
      CLAWGATE_GRPC_TLS_CERT_FILE: `${dir}/tls.crt`,
      CLAWGATE_GRPC_TLS_KEY_FILE: `${dir}/tls.key`,
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: `${dir}/ca.crt`,
    });
    expect(dp.env).toMatchObject({
      CLAWGATE_CP_TLS_CA_FILE: `${dp.mount?.mountPath}/ca.crt`,
      CLAWGATE_CP_TLS_CERT_FILE: `${dp.mount?.mountPath}/tls.crt`,
      CLAWGATE_CP_TLS_KEY_FILE: `${dp.mount?.mountPath}/tls.key`,
    });
  });

  it("generate one CA, a server certificate for the Service's names and a client certificate", async () => {
    const { docs } = await render("tls.serverName=cp.example.internal");
    const server = secretFiles(docs, "clawgate-control-plane-tls");
    const client = secretFiles(docs, "clawgate-data-plane-tls");
    expect(client["ca.crt"]).toBe(server["ca.crt"]);
    const ca = new X509Certificate(server["ca.crt"]!);
    expect(ca.ca).toBe(true);
    const serverCert = new X509Certificate(server["tls.crt"]!);
    const clientCert = new X509Certificate(client["tls.crt"]!);
    expect(serverCert.verify(ca.publicKey)).toBe(true);
    expect(clientCert.verify(ca.publicKey)).toBe(true);
    // The name each data plane dials (CLAWGATE_CP_ADDRESSES), its longer forms, serverName.
    for (const name of [
      "clawgate-control-plane",
      "clawgate-control-plane.default.svc",
      "clawgate-control-plane.default.svc.cluster.local",
      "cp.example.internal",
    ]) {
      expect(serverCert.checkHost(name), name).toBe(name);
    }
    // A data plane does not hold the control plane's key: the two key pairs differ.
    expect(client["tls.key"]).not.toBe(server["tls.key"]);
    expect(clientCert.checkHost("clawgate-control-plane")).toBeUndefined();
  });

  it("render no Secret and no TLS setting with tls.enabled=false", async () => {
    const { docs } = await render("tls.enabled=false");
    expect(docs.filter((d) => d.kind === "Secret").map((d) => d.metadata.name)).toEqual([
      "clawgate-control-plane-admin-token",
    ]);
    for (const name of ["clawgate-control-plane", "clawgate-data-plane"]) {
      const { env, mount, volume } = plane(docs, name);
      expect(Object.keys(env).filter((key) => key.includes("_TLS_"))).toEqual([]);
      expect(mount).toBeUndefined();
      expect(volume).toBeUndefined();
    }
  });

  it("mount the Secret in both planes and point every TLS setting at its files", async () => {
    const { docs } = await render("tls.enabled=true", "tls.existingSecret=snapshot-tls");
    // The operator's Secret replaces the generated ones.
    expect(docs.some((d) => d.kind === "Secret" && d.metadata.name.endsWith("-tls"))).toBe(false);
    const cp = plane(docs, "clawgate-control-plane");
    const dp = plane(docs, "clawgate-data-plane");
    for (const { mount, volume } of [cp, dp]) {
      expect(volume?.secret.secretName).toBe("snapshot-tls");
      expect(mount?.readOnly).toBe(true);
    }
    const dir = cp.mount?.mountPath;
    expect(dp.mount?.mountPath).toBe(dir);
    expect(cp.env).toMatchObject({
      CLAWGATE_GRPC_TLS_CERT_FILE: `${dir}/tls.crt`,
      CLAWGATE_GRPC_TLS_KEY_FILE: `${dir}/tls.key`,
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: `${dir}/ca.crt`,
    });
    expect(dp.env).toMatchObject({
      CLAWGATE_CP_TLS_CA_FILE: `${dir}/ca.crt`,
      CLAWGATE_CP_TLS_CERT_FILE: `${dir}/tls.crt`,
      CLAWGATE_CP_TLS_KEY_FILE: `${dir}/tls.key`,
    });
    expect(dp.env.CLAWGATE_CP_TLS_SERVER_NAME).toBeUndefined();
  });

  it("without mutual, neither require nor present client certificates", async () => {
    const { docs } = await render(
      "tls.enabled=true",
      "tls.existingSecret=snapshot-tls",
      "tls.mutual=false",
      "tls.serverName=cp.example.internal",
    );
    const cp = plane(docs, "clawgate-control-plane");
    const dp = plane(docs, "clawgate-data-plane");
    expect(cp.env.CLAWGATE_GRPC_TLS_CERT_FILE).toBeDefined();
    expect(cp.env.CLAWGATE_GRPC_TLS_CLIENT_CA_FILE).toBeUndefined();
    expect(dp.env.CLAWGATE_CP_TLS_CA_FILE).toBeDefined();
    expect(dp.env.CLAWGATE_CP_TLS_CERT_FILE).toBeUndefined();
    expect(dp.env.CLAWGATE_CP_TLS_KEY_FILE).toBeUndefined();
    expect(dp.env.CLAWGATE_CP_TLS_SERVER_NAME).toBe("cp.example.internal");
  });

  it("refuse a misspelt key under tls", async () => {
    const result = await render("tls.enable=true");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
  });
});
