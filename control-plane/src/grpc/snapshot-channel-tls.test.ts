import { type ConnectionState, readCpTls, SnapshotClient } from "@clawgate/data-plane";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { readGrpcServerTls } from "../config/grpc-tls.js";
import { Fleet } from "../fleet/fleet.js";
import { SnapshotBuilder } from "../snapshot/snapshot-builder.js";
import { openEmbeddedStore } from "../store/embedded-store.js";
import { makeTestPki, type TestPki } from "../testing/test-pki.js";
import { startSnapshotServer } from "./snapshot-server.js";

const PREFIX = "/clawgate/";
const quiet = pino({ level: "silent" });

let pki: TestPki;
beforeAll(async () => {
  pki = await makeTestPki();
});
afterAll(() => pki?.remove());

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A control plane's snapshot service with one upstream published, secured as `mutual` says. */
async function controlPlane(
  mutual: boolean,
  server = { cert: pki.serverCert, key: pki.serverKey },
) {
  const store = await openEmbeddedStore({});
  await store.commit([], [{ type: "put", key: `${PREFIX}upstreams/first`, value: "{}" }]);
  const builder = new SnapshotBuilder({ store, prefix: PREFIX, logger: quiet, instanceId: "cp" });
  await builder.start();
  const fleet = new Fleet();
  const snapshotServer = await startSnapshotServer({
    address: "127.0.0.1:0",
    builder,
    fleet,
    logger: quiet,
    tls: readGrpcServerTls({
      grpcTlsCertFile: server.cert,
      grpcTlsKeyFile: server.key,
      grpcTlsClientCaFile: mutual ? pki.caCert : undefined,
    }),
  });
  cleanups.push(async () => {
    await snapshotServer.close(1_000);
    await builder.stop();
    await store.close();
  });
  return {
    fleet,
    address: `127.0.0.1:${snapshotServer.port}`,
    version: builder.current()!.version,
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
  cleanups.push(() => client.stop());
  return new Promise((resolve) => {
    client.onStateChange((state: ConnectionState) => {
      if (state.status === "waiting") resolve({ refused: state.reason });
    });
    const poll = setInterval(() => {
      if (applied.length === 0) return;
      clearInterval(poll);
      resolve({ applied: applied[0]! });
    }, 5);
    cleanups.push(async () => clearInterval(poll));
    client.start();
  });
}

describe("snapshot channel over TLS", () => {
  it("delivers snapshots to a client that trusts the server's CA", async () => {
    const cp = await controlPlane(false);
    expect(await firstAttempt(cp.address, "dp-tls", { ca: pki.caCert })).toEqual({
      applied: cp.version,
    });
    expect(cp.fleet.get("dp-tls")?.connected).toBe(true);
  });

  it("refuses a client that trusts a different CA, before any Hello", async () => {
    const cp = await controlPlane(false);
    const outcome = await firstAttempt(cp.address, "dp-other-ca", { ca: pki.otherCaCert });
    expect(outcome).toMatchObject({
      refused: expect.stringMatching(/UNAVAILABLE.*unable to verify the first certificate/),
    });
    expect(cp.fleet.get("dp-other-ca")).toBeUndefined();
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
    expect(cp.fleet.get("dp-ip")).toBeUndefined();
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
    expect(cp.fleet.get("dp-mtls")).toMatchObject({ connected: true, hostname: "dp-mtls" });
  });

  it.each<[string, () => ClientTls, RegExp]>([
    // TLS 1.3: the server asks for the certificate after the client's Finished, and alerts.
    ["no client certificate", () => ({ ca: pki.caCert }), /certificate required/],
    [
      "a client certificate from another CA",
      () => ({ ca: pki.caCert, cert: pki.otherClientCert, key: pki.otherClientKey }),
      /UNAVAILABLE/,
    ],
  ])("refuses a client with %s; the fleet never hears of it", async (_label, tls, reason) => {
    const cp = await controlPlane(true);
    const outcome = await firstAttempt(cp.address, "dp-refused", tls());
    expect(outcome).toMatchObject({ refused: expect.stringMatching(reason) });
    expect(cp.fleet.get("dp-refused")).toBeUndefined();
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
    expect(cp.fleet.get("dp-plaintext")).toBeUndefined();
  });
});
