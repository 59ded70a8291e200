import { readFileSync } from "node:fs";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  httpsGet,
  metricValue,
  type NamedUpstream,
  type NamedUpstreamReply,
  send,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
} from "./support/index.js";

// TLS both ways with the real binaries and throwaway certificates: clients reach the data
// plane's HTTPS listener (certificate chosen by SNI), which dials HTTPS upstreams with each
// upstream's own CA and client certificate; a node with a certificate from the wrong CA is
// refused as kind tls and evicted by its probes; a CA file the data plane cannot read is NACKed.
describe("TLS on the proxy listener and to upstreams", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let ca: string;
  let cp: ControlPlane;
  let dp: DataPlane;
  let tlsPort: number;
  let good: NamedUpstream;
  let rogue: NamedUpstream;
  let mutual: NamedUpstream;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    ca = readFileSync(pki.caCert, "utf8");
    const gateway = await issueServerCertificate(pki, "gateway", "DNS:gateway.test");
    const rogueCert = await issueServerCertificate(pki, "rogue", "IP:127.0.0.1", {
      ca: "other-ca",
    });
    good = await startNamedUpstream("good", {
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    teardown.add("upstream good", () => good.close());
    rogue = await startNamedUpstream("rogue", {
      tls: { certFile: rogueCert.cert, keyFile: rogueCert.key },
    });
    teardown.add("upstream rogue", () => rogue.close());
    mutual = await startNamedUpstream("mutual", {
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey, clientCaFile: pki.caCert },
    });
    teardown.add("upstream mutual", () => mutual.close());

    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    [tlsPort] = (await freePorts(1)) as [number];
    dp = await startDataPlane({
      CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
      CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
      CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
      CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      CLAWGATE_PROXY_TLS_CERTIFICATES: `${gateway.cert}:${gateway.key}`,
    });
    teardown.add("data plane", () => dp.stop());

    const fastProbes = { intervalMs: 200, timeoutMs: 1_000, path: "/healthz" };
    const rareProbes = { intervalMs: 3_600_000, path: "/healthz" };
    const tls = { caFile: pki.caCert };
    await cp.admin.apply([
      {
        kind: "upstream",
        name: "secure",
        spec: { nodes: [{ address: good.address }], tls, healthCheck: fastProbes },
      },
      {
        kind: "upstream",
        name: "mixed",
        spec: {
          nodes: [{ address: good.address }, { address: rogue.address }],
          tls,
          healthCheck: fastProbes,
        },
      },
      // Probed once an hour: its one request meets the certificate, not an eviction.
      {
        kind: "upstream",
        name: "rogue",
        spec: { nodes: [{ address: rogue.address }], tls, healthCheck: rareProbes },
      },
      {
        kind: "upstream",
        name: "mutual",
        spec: {
          nodes: [{ address: mutual.address }],
          tls: { ...tls, clientCertFile: pki.clientCert, clientKeyFile: pki.clientKey },
          healthCheck: fastProbes,
        },
      },
      ...["secure", "mixed", "rogue", "mutual"].map((name) => ({
        kind: "route" as const,
        name,
        spec: { match: { pathPrefix: `/${name}` }, upstream: name, retry: { attempts: 0 } },
      })),
    ]);
    await waitForConvergence(cp, [dp]);
  });

  afterAll(() => teardown.run());

  it("serves HTTPS clients with the certificate their SNI name selects, and proxies to HTTPS", async () => {
    const named = await httpsGet(tlsPort, "/secure/a", ca, "gateway.test");
    expect(named.san).toBe("DNS:gateway.test");
    expect(named.status).toBe(200);
    const reply = JSON.parse(named.body) as NamedUpstreamReply;
    expect(reply.upstream).toBe("good");
    expect(reply.headers["x-forwarded-proto"]).toBe("https");
    const fallback = await httpsGet(tlsPort, "/secure/b", ca, "localhost");
    expect(fallback.san).toBe("IP Address:127.0.0.1, DNS:localhost");
    // The plaintext listener stays beside it.
    expect((await send(`${dp.proxyUrl}/secure/c`)).status).toBe(200);
  });

  it("presents the upstream's client certificate to a node that demands one", async () => {
    const response = await send(`${dp.proxyUrl}/mutual/x`);
    expect(response.status).toBe(200);
    expect((response.json as NamedUpstreamReply).upstream).toBe("mutual");
  });

  it("refuses a node's certificate from another CA: 502 to the client, kind tls counted", async () => {
    const response = await send(`${dp.proxyUrl}/rogue/x`);
    expect(response.status).toBe(502);
    expect(response.json).toMatchObject({
      error: { code: "CLAWGATE_UPSTREAM_CONNECT_FAILED" },
    });
    expect(
      metricValue(await dp.metrics(), "clawgate_upstream_errors_total", {
        upstream: "rogue",
        kind: "tls",
      }),
    ).toBe(1);
    expect(dp.process.output.grep('"kind":"tls"')).not.toEqual([]);
    expect(rogue.requests).toBe(0);
  });

  it("evicts the node whose certificate its probes refuse, and keeps the good one", async () => {
    await waitFor(
      async () => {
        const text = await dp.metrics();
        const healthy = (address: string) =>
          metricValue(text, "clawgate_upstream_node_healthy", { upstream: "mixed", node: address });
        return healthy(rogue.address) === 0 && healthy(good.address) === 1;
      },
      { what: "the rogue node of mixed to be evicted by its TLS probes", timeoutMs: 20_000 },
    );
    for (let i = 0; i < 4; i++) expect((await send(`${dp.proxyUrl}/mixed/x`)).status).toBe(200);
  });

  it("NACKs a snapshot whose CA file the data plane cannot read, naming the field and path", async () => {
    await cp.admin.putUpstream("secure", {
      nodes: [{ address: good.address }],
      tls: { caFile: "/nonexistent/clawgate-ca.pem" },
    });
    const nack = await waitFor(
      async () => {
        const item = (await cp.admin.dataplanes()).find((d) => d.nodeId === dp.nodeId);
        return item?.state === "NACKED" ? item : false;
      },
      { what: "the data plane to NACK the unreadable CA file", timeoutMs: 20_000 },
    );
    expect((nack.lastNack as { error: string }).error).toContain(
      'upstream "secure": tls.caFile cannot read /nonexistent/clawgate-ca.pem (ENOENT)',
    );
    // The last good snapshot keeps serving.
    expect((await httpsGet(tlsPort, "/secure/d", ca, "localhost")).status).toBe(200);
  });
});
