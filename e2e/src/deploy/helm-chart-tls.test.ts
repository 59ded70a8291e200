import { execFile } from "node:child_process";
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

describe("chart tls values", () => {
  it("leave the snapshot stream in plaintext by default", async () => {
    const { docs } = await render();
    for (const name of ["clawgate-control-plane", "clawgate-data-plane"]) {
      const { env, mount, volume } = plane(docs, name);
      expect(Object.keys(env).filter((key) => key.includes("_TLS_"))).toEqual([]);
      expect(mount).toBeUndefined();
      expect(volume).toBeUndefined();
    }
  });

  it("mount the Secret in both planes and point every TLS setting at its files", async () => {
    const { docs } = await render("tls.enabled=true", "tls.existingSecret=snapshot-tls");
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

  it("refuse tls.enabled without a Secret", async () => {
    const result = await render("tls.enabled=true");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("tls.existingSecret must name a Secret");
  });

  it("refuse a misspelt key under tls", async () => {
    const result = await render("tls.enable=true");
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
  });
});
