import { once } from "node:events";
import { readFileSync } from "node:fs";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { probeNode } from "./probe.js";
import type { ProbeSpec, ProbeTls } from "./probe-protocol.js";

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
    right = { ca: readFileSync(pki.caCert, "utf8"), rejectUnauthorized: true };
    wrong = { ca: readFileSync(pki.otherCaCert, "utf8"), rejectUnauthorized: true };
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
