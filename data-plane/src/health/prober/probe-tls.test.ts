import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { createSecureContext } from "node:tls";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { LookupFunction } from "../../upstream/node-resolver.js";
import { probeNode, setProbeLookup } from "./probe.js";
import type { ProbeSpec, ProbeTls, ProbeTlsFiles } from "./probe-protocol.js";

function pemFiles(caFile: string): ProbeTlsFiles {
  return { ca: readFileSync(caFile, "utf8"), contextKey: caFile };
}

/** Resolves every name to 127.0.0.1, so a test node can be named as a public API is. */
const toLoopback = ((
  _host: string,
  options: { all?: boolean },
  callback: (error: null, address: unknown, family?: number) => void,
) =>
  options.all
    ? callback(null, [{ address: "127.0.0.1", family: 4 }])
    : callback(null, "127.0.0.1", 4)) as unknown as LookupFunction;

// Probes dial an upstream with TLS the way requests do, so a node whose certificate requests
// would refuse fails its probes (and is evicted) instead of staying in rotation.
describe("probes over TLS", () => {
  let pki: TestPki;
  let server: Server;
  let port: number;
  let right: ProbeTls;
  let wrong: ProbeTls;

  beforeAll(async () => {
    pki = await makeTestPki();
    server = createServer(
      { cert: readFileSync(pki.serverCert), key: readFileSync(pki.serverKey) },
      (req, res) => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ status: req.url === "/healthz" ? "ok" : "down" }));
      },
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
    right = { files: pemFiles(pki.caCert), rejectUnauthorized: true };
    wrong = { files: pemFiles(pki.otherCaCert), rejectUnauthorized: true };
  });

  afterAll(async () => {
    server.closeAllConnections();
    server.close();
    await pki.remove();
  });

  const spec = (tls: ProbeTls | undefined, path: string): ProbeSpec => ({
    host: "127.0.0.1",
    port,
    timeoutMs: 5_000,
    path,
    expectStatus: path === "" ? "" : "ok",
    tls,
  });

  it("passes an HTTPS health check on a certificate the upstream's CA signed", async () => {
    const outcome = await probeNode(spec(right, "/healthz"));
    expect(outcome.evidence).toMatchObject({ httpStatus: 200, bodyStatus: "ok" });
    expect(outcome.ok).toBe(true);
  });

  it("fails a node whose certificate another CA signed, with tls evidence", async () => {
    const outcome = await probeNode(spec(wrong, "/healthz"));
    expect(outcome.ok).toBe(false);
    expect(outcome.evidence.error).toBe("tls UNABLE_TO_VERIFY_LEAF_SIGNATURE");
  });

  it("completes a TLS handshake for a TCP-only check, so a bad certificate fails it too", async () => {
    expect((await probeNode(spec(right, ""))).ok).toBe(true);
    const outcome = await probeNode(spec(wrong, ""));
    expect(outcome.ok).toBe(false);
    expect(outcome.evidence.error).toBe("tls UNABLE_TO_VERIFY_LEAF_SIGNATURE");
  });
});

// A node named like api.example.com with no serverName and a TCP-only check: requests send the
// name as SNI (undici does), so a server choosing its certificate by SNI must hand the probe
// the same certificate, not its default one.
describe("a TCP-only probe over TLS to a node named by DNS", () => {
  let pki: TestPki;
  let server: Server;
  let port: number;

  beforeAll(async () => {
    pki = await makeTestPki();
    const named = await issueServerCertificate(pki, "api", "DNS:api.clawgate.test");
    const forName = createSecureContext({
      cert: readFileSync(named.cert),
      key: readFileSync(named.key),
    });
    // The default certificate names 127.0.0.1 and localhost only: wrong for the name.
    server = createServer(
      {
        cert: readFileSync(pki.serverCert),
        key: readFileSync(pki.serverKey),
        SNICallback: (servername, done) =>
          done(null, servername === "api.clawgate.test" ? forName : undefined),
      },
      (_req, res) => res.end(),
    );
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    port = (server.address() as AddressInfo).port;
    setProbeLookup(toLoopback);
  });

  afterAll(async () => {
    setProbeLookup(undefined);
    server.closeAllConnections();
    server.close();
    await pki.remove();
  });

  it("sends the node's host as SNI and so checks the certificate traffic gets", async () => {
    const outcome = await probeNode({
      host: "api.clawgate.test",
      port,
      timeoutMs: 5_000,
      path: "",
      expectStatus: "",
      tls: { files: pemFiles(pki.caCert), rejectUnauthorized: true },
    });
    expect(outcome.evidence.error).toBeUndefined();
    expect(outcome.ok).toBe(true);
  });
});
