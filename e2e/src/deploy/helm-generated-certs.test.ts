import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import {
  type ControlPlane,
  makeWorkDir,
  REPO_ROOT,
  removeWorkDir,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
  whoAnswered,
} from "../support/index.js";
import { helmBinary } from "./helm-binary.js";

const run = promisify(execFile);
const CHART = join(REPO_ROOT, "charts/clawgate");

/**
 * Writes the ca.crt, tls.crt and tls.key of a Secret from `helm template` into `dir`, as the
 * pod's Secret volume would, and returns their paths.
 */
async function writeSecretFiles(rendered: string, name: string, dir: string) {
  const secret = parseAllDocuments(rendered)
    .map((doc) => doc.toJS() as { kind?: string; metadata?: { name?: string }; data?: object })
    .find((doc) => doc?.kind === "Secret" && doc.metadata?.name === name);
  if (secret?.data === undefined) throw new Error(`helm template rendered no Secret ${name}`);
  const paths: Record<string, string> = {};
  for (const [key, value] of Object.entries(secret.data as Record<string, string>)) {
    paths[key] = join(dir, `${name}-${key}`);
    await writeFile(paths[key], Buffer.from(value, "base64"));
  }
  return { ca: paths["ca.crt"]!, cert: paths["tls.crt"]!, key: paths["tls.key"]! };
}

// The certificates the chart generates by default, used by the real binaries the way the two
// Deployments wire them: the data plane dials the control plane's Service name.
describe("chart-generated snapshot certificates", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let client: { ca: string; cert: string; key: string };

  beforeAll(async () => {
    const dir = await makeWorkDir("helm-certs");
    teardown.add("cert dir", () => removeWorkDir(dir));
    const { stdout } = await run(await helmBinary(), ["template", "clawgate", CHART], {
      maxBuffer: 16 * 1024 * 1024,
    });
    const server = await writeSecretFiles(stdout, "clawgate-control-plane-tls", dir);
    client = await writeSecretFiles(stdout, "clawgate-data-plane-tls", dir);
    cp = await startControlPlane({
      CLAWGATE_GRPC_TLS_CERT_FILE: server.cert,
      CLAWGATE_GRPC_TLS_KEY_FILE: server.key,
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: server.ca,
    });
    teardown.add("control plane", () => cp.stop());
    const upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    // Nothing is published before the first write; a data plane becomes ready on a snapshot.
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
  });

  afterAll(() => teardown.run());

  it("let a data plane sync over mutual TLS to the Service name", async () => {
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      // The pod dials clawgate-control-plane:9190; here that name is checked on a loopback port.
      CLAWGATE_CP_TLS_SERVER_NAME: "clawgate-control-plane",
      CLAWGATE_CP_TLS_CA_FILE: client.ca,
      CLAWGATE_CP_TLS_CERT_FILE: client.cert,
      CLAWGATE_CP_TLS_KEY_FILE: client.key,
      CLAWGATE_NODE_ID: "dp-generated",
    });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    expect(await whoAnswered(`${dp.proxyUrl}/api/hello`)).toBe("a");
    expect(cp.process.output.grep('"security":"mutual-tls"')).not.toEqual([]);
    expect((await cp.admin.dataplanes()).map((item) => item.nodeId)).toContain("dp-generated");
  });
});
