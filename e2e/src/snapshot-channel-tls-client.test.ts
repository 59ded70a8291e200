import { makeTestPki, type TestPki } from "@clawgate/control-plane/testing";
import { type ConnectionState, readCpTls, SnapshotClient } from "@clawgate/data-plane";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startControlPlane, Teardown, waitFor } from "./support/index.js";

// The data plane's real snapshot client against the real control-plane binary over TLS: each
// certificate and name check, one attempt at a time. (It lived in the control plane's tests,
// which cannot import the data plane any more.)
const quiet = { debug() {}, info() {}, warn() {}, error() {} };

let pki: TestPki;
beforeAll(async () => {
  pki = await makeTestPki();
});
afterAll(() => pki?.remove());

/** Each test's clients, stopped after it. */
const teardown = new Teardown();
afterEach(() => teardown.run());

/**
 * The control planes, one per TLS setup, shared by the tests that use that setup and stopped
 * after the last: a test needs a control plane that has published one upstream and answers
 * handshakes, and no test changes its config or its TLS. Each client gets a node ID no other
 * test uses, so "the fleet never hears of it" still checks that client alone.
 */
const shared = new Teardown();
afterAll(() => shared.run());
const controlPlanes = new Map<string, ReturnType<typeof startedControlPlane>>();

/** A control plane with one upstream published, its snapshot channel secured as `mutual` says. */
function controlPlane(mutual: boolean, server = { cert: pki.serverCert, key: pki.serverKey }) {
  const setup = JSON.stringify([mutual, server.cert, server.key]);
  let started = controlPlanes.get(setup);
  if (started === undefined) {
    started = startedControlPlane(mutual, server);
    controlPlanes.set(setup, started);
  }
  return started;
}

async function startedControlPlane(mutual: boolean, server: { cert: string; key: string }) {
  const cp = await startControlPlane({
    CLAWGATE_GRPC_TLS_CERT_FILE: server.cert,
    CLAWGATE_GRPC_TLS_KEY_FILE: server.key,
    ...(mutual ? { CLAWGATE_GRPC_TLS_CLIENT_CA_FILE: pki.caCert } : {}),
  });
  shared.add("control plane", () => cp.stop());
  await cp.admin.putUpstream("first", {});
  // The version a data plane is sent once the write is published.
  const version = await waitFor(
    async () => {
      const status = await cp.admin.snapshot();
      const counts = status.counts as { upstreams: number } | undefined;
      return status.published && counts?.upstreams === 1 ? status.version : false;
    },
    { what: "the upstream to be published" },
  );
  return {
    address: cp.grpcAddress,
    version,
    /** The data plane the control plane lists under `nodeId`, if any. */
    listed: async (nodeId: string) =>
      (await cp.admin.dataplanes()).find((item) => item.nodeId === nodeId),
  };
}

interface ClientTls {
  ca?: string;
  cert?: string;
  key?: string;
  serverName?: string;
}

/**
 * The data plane's real snapshot client with its real settings reader, started. Resolves with
 * the outcome of its first attempt: the version it applied, or why the stream ended.
 */
function firstAttempt(
  address: string,
  nodeId: string,
  tls: ClientTls,
): Promise<{ applied: number } | { refused: string }> {
  const applied: number[] = [];
  const client = new SnapshotClient({
    addresses: [address],
    nodeId,
    hostname: nodeId,
    softwareVersion: "test",
    lastAppliedVersion: () => applied.at(-1) ?? 0,
    logger: quiet,
    // One attempt is the whole story here: no retry within the test's lifetime.
    backoff: { baseMs: 60_000, maxMs: 60_000 },
    random: () => 0.999,
    apply: (snapshot) => {
      applied.push(Number(snapshot.version));
      return { ok: true };
    },
    tls: readCpTls({
      cpTlsCaFile: tls.ca,
      cpTlsCertFile: tls.cert,
      cpTlsKeyFile: tls.key,
      cpTlsServerName: tls.serverName,
    }),
  });
  teardown.add(nodeId, () => client.stop());
  return new Promise((resolve) => {
    client.onStateChange((state: ConnectionState) => {
      if (state.status === "waiting") resolve({ refused: state.reason });
    });
    const poll = setInterval(() => {
      if (applied.length === 0) return;
      clearInterval(poll);
      resolve({ applied: applied[0]! });
    }, 5);
    teardown.add(`${nodeId} poll`, async () => clearInterval(poll));
    client.start();
  });
}

describe("snapshot channel over TLS", () => {
  it("delivers snapshots to a client that trusts the server's CA", async () => {
    const cp = await controlPlane(false);
    expect(await firstAttempt(cp.address, "dp-tls", { ca: pki.caCert })).toEqual({
      applied: cp.version,
    });
    expect(await cp.listed("dp-tls")).toBeDefined();
  });

  it("refuses a client that trusts a different CA, before any Hello", async () => {
    const cp = await controlPlane(false);
    const outcome = await firstAttempt(cp.address, "dp-other-ca", { ca: pki.otherCaCert });
    expect(outcome).toMatchObject({
      refused: expect.stringMatching(/UNAVAILABLE.*unable to verify the first certificate/),
    });
    expect(await cp.listed("dp-other-ca")).toBeUndefined();
  });

  it("checks an IP address against the certificate's IP SANs", async () => {
    // SNI is not sent for an IP (RFC 6066), but the name check must still happen: a
    // certificate for localhost alone does not prove it belongs to 127.0.0.1.
    const cp = await controlPlane(false, {
      cert: pki.dnsOnlyServerCert,
      key: pki.dnsOnlyServerKey,
    });
    const outcome = await firstAttempt(cp.address, "dp-ip", { ca: pki.caCert });
    expect(outcome).toMatchObject({
      refused: expect.stringMatching(/IP: 127\.0\.0\.1 is not in the cert's list/),
    });
    expect(await cp.listed("dp-ip")).toBeUndefined();
    // The same certificate passes when the data plane is told the name it carries.
    const named = await firstAttempt(cp.address, "dp-named", {
      ca: pki.caCert,
      serverName: "localhost",
    });
    expect(named).toEqual({ applied: cp.version });
  });

  it("checks the server name given in place of the address's host", async () => {
    const cp = await controlPlane(false);
    const wrong = await firstAttempt(cp.address, "dp-wrong-name", {
      ca: pki.caCert,
      serverName: "cp.example.com",
    });
    expect(wrong).toMatchObject({ refused: expect.stringMatching(/cp\.example\.com/) });
    const right = await firstAttempt(cp.address, "dp-right-name", {
      ca: pki.caCert,
      serverName: "localhost",
    });
    expect(right).toEqual({ applied: cp.version });
  });
});

describe("snapshot channel over mutual TLS", () => {
  it("delivers snapshots to a client with a certificate the client CA signed", async () => {
    const cp = await controlPlane(true);
    const outcome = await firstAttempt(cp.address, "dp-mtls", {
      ca: pki.caCert,
      cert: pki.clientCert,
      key: pki.clientKey,
    });
    expect(outcome).toEqual({ applied: cp.version });
    expect(await cp.listed("dp-mtls")).toMatchObject({ nodeId: "dp-mtls" });
  });

  it.each<[string, () => ClientTls, RegExp]>([
    // TLS 1.3: the server asks for the certificate after the client's Finished, and alerts.
    ["no client certificate", () => ({ ca: pki.caCert }), /certificate required/],
    [
      "a client certificate from another CA",
      () => ({ ca: pki.caCert, cert: pki.otherClientCert, key: pki.otherClientKey }),
      /UNAVAILABLE/,
    ],
  ])("refuses a client with %s; the fleet never hears of it", async (label, tls, reason) => {
    const cp = await controlPlane(true);
    const nodeId = `dp-refused-${label.replaceAll(" ", "-")}`;
    const outcome = await firstAttempt(cp.address, nodeId, tls());
    expect(outcome).toMatchObject({ refused: expect.stringMatching(reason) });
    expect(await cp.listed(nodeId)).toBeUndefined();
  });

  it("refuses to start a client whose key is not its certificate's", () => {
    expect(() =>
      readCpTls({
        cpTlsCaFile: pki.caCert,
        cpTlsCertFile: pki.clientCert,
        cpTlsKeyFile: pki.serverKey,
      }),
    ).toThrow(/cpTlsKeyFile.*is not the key of the certificate/);
  });

  it("refuses a plaintext client", async () => {
    const cp = await controlPlane(true);
    const outcome = await firstAttempt(cp.address, "dp-plaintext", {});
    expect(outcome).toMatchObject({ refused: expect.stringMatching(/UNAVAILABLE/) });
    expect(await cp.listed("dp-plaintext")).toBeUndefined();
  });
});
