import { makeTestPki, type TestPki } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CONTROL_PLANE_BIN,
  type ControlPlane,
  DATA_PLANE_BIN,
  ManagedProcess,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
  whoAnswered,
} from "./support/index.js";

// The snapshot channel under mutual TLS, with the real binaries: a data plane holding a client
// certificate from the CA the control plane trusts syncs and serves; one without never does.
describe("snapshot channel over mutual TLS", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let cp: ControlPlane;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    const upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    cp = await startControlPlane({
      CLAWGATE_GRPC_TLS_CERT_FILE: pki.serverCert,
      CLAWGATE_GRPC_TLS_KEY_FILE: pki.serverKey,
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: pki.caCert,
    });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
  });

  afterAll(() => teardown.run());

  it("syncs and serves a data plane with a client certificate the control plane's CA signed", async () => {
    const dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_NODE_ID: "dp-mtls",
      CLAWGATE_CP_TLS_CA_FILE: pki.caCert,
      CLAWGATE_CP_TLS_CERT_FILE: pki.clientCert,
      CLAWGATE_CP_TLS_KEY_FILE: pki.clientKey,
    });
    teardown.add("dp-mtls", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    expect(await whoAnswered(`${dp.proxyUrl}/api/hello`)).toBe("a");
    expect(cp.process.output.grep('"security":"mutual-tls"')).not.toEqual([]);
    expect(dp.process.output.grep('"security":"mutual-tls"')).not.toEqual([]);
    // Dialling an IP over TLS used to print Node's DEP0123 warning (an IP as SNI) into the
    // JSON log; the name is checked against the IP SAN instead, with no SNI sent.
    expect(cp.grpcAddress).toMatch(/^127\.0\.0\.1:/);
    expect(dp.process.output.grep("DEP0123")).toEqual([]);
    expect(dp.process.output.grep("ServerName")).toEqual([]);
  });

  it("never readies a data plane without a client certificate, nor lists it", async () => {
    const dp = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_NODE_ID: "dp-no-cert",
        CLAWGATE_CP_TLS_CA_FILE: pki.caCert,
      },
      { waitUntil: "healthz" },
    );
    teardown.add("dp-no-cert", () => dp.stop());
    // Three refused attempts, a few reconnect backoffs apart: long enough for a stream that
    // could succeed to have done so (the first data plane synced well within this).
    const refusals = await waitFor(
      () => {
        dp.process.assertRunning();
        const lines = dp.process.output.grep("snapshot stream ended; reconnecting");
        return lines.length >= 3 ? lines : false;
      },
      { what: "dp-no-cert to be refused three times", timeoutMs: 20_000 },
    );
    expect(refusals[0]).toContain("certificate required");
    expect(await dp.readyStatus()).toBe(503);
    expect((await dp.snapshotVersion()) ?? 0).toBe(0);
    const listed = (await cp.admin.dataplanes()).map((item) => item.nodeId);
    expect(listed).toContain("dp-mtls");
    expect(listed).not.toContain("dp-no-cert");
  });
});

describe("TLS settings checked at boot", () => {
  async function exitOf(bin: string, env: Record<string, string>) {
    const process = await ManagedProcess.spawn({
      name: bin.includes("data-plane") ? "data-plane" : "control-plane",
      command: globalThis.process.execPath,
      args: [bin],
      env,
    });
    const status = await process.exited;
    return { code: status.code, output: process.output.text() };
  }

  it("exits 2 naming grpcTlsClientCaFile when the control plane has a client CA but no certificate", async () => {
    const { code, output } = await exitOf(CONTROL_PLANE_BIN, {
      CLAWGATE_GRPC_LISTEN: "127.0.0.1:0",
      CLAWGATE_ADMIN_LISTEN: "127.0.0.1:0",
      CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: "/etc/clawgate/ca.crt",
    });
    expect(code).toBe(2);
    expect(output).toContain("grpcTlsClientCaFile");
  });

  it("exits 2 naming cpTlsCaFile when the data plane's CA file is missing", async () => {
    const { code, output } = await exitOf(DATA_PLANE_BIN, {
      CLAWGATE_PROXY_LISTEN: "127.0.0.1:0",
      CLAWGATE_DP_ADMIN_LISTEN: "127.0.0.1:0",
      CLAWGATE_CP_TLS_CA_FILE: "/nonexistent/clawgate-ca.crt",
    });
    expect(code).toBe(2);
    expect(output).toContain("cpTlsCaFile");
    expect(output).toContain("ENOENT");
  });
});
