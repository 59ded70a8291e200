import { copyFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  FreshConnections,
  loggedAs,
  type NamedUpstream,
  startControlPlane,
  startNamedUpstream,
  startWorkerDataPlane,
  Teardown,
  waitFor,
  waitForConvergence,
} from "../support/index.js";

/**
 * An upstream's CA file renewed on disk with workers: the reload is an apply in two phases on
 * the version served when its turn comes, so every worker's pools read the new file, and the
 * version after it is still a delta on what they serve (ACKed, not NACKed for a version mix).
 */
describe("upstream TLS files reloaded in a data plane with workers", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let cp: ControlPlane;
  let dp: DataPlane;
  let node: NamedUpstream;
  let liveCa = "";
  const client = new FreshConnections(teardown, 15_000);

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    node = await startNamedUpstream("secure", {
      tls: { certFile: pki.serverCert, keyFile: pki.serverKey },
    });
    teardown.add("upstream secure", () => node.close());
    // The data plane starts trusting the wrong CA: the node's certificate is refused.
    liveCa = join(pki.dir, "live-ca.pem");
    copyFileSync(pki.otherCaCert, liveCa);
    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    await cp.admin.apply([
      {
        kind: "upstream",
        name: "secure",
        spec: {
          nodes: [{ address: node.address }],
          tls: { caFile: liveCa },
          // Probed once an hour: the requests meet the certificate, not an eviction.
          healthCheck: { intervalMs: 3_600_000, path: "/healthz" },
        },
      },
      {
        kind: "route",
        name: "secure",
        spec: { match: { pathPrefix: "/secure" }, upstream: "secure", retry: { attempts: 0 } },
      },
    ]);
    dp = await startWorkerDataPlane(teardown, cp);
  }, 180_000);

  afterAll(() => teardown.run());

  it("reloads the file in every worker, and the next change is a delta they all take", async () => {
    expect(await client.status(`${dp.proxyUrl}/secure/before`)).toBe(502);
    copyFileSync(pki.caCert, `${liveCa}.new`);
    renameSync(`${liveCa}.new`, liveCa);
    await waitFor(() => loggedAs(dp, "upstream TLS files reloaded; new connections use them")[0], {
      what: "the reload log line",
      timeoutMs: 30_000,
    });
    // Fresh connections, so the cluster hands them to both workers.
    for (let i = 0; i < 8; i++) expect(await client.status(`${dp.proxyUrl}/secure/${i}`)).toBe(200);

    const write = await cp.admin.putRoute("added", {
      match: { pathPrefix: "/added" },
      upstream: "secure",
    });
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1, timeoutMs: 60_000 });
    for (let i = 0; i < 8; i++) expect(await client.status(`${dp.proxyUrl}/added/${i}`)).toBe(200);
    expect(
      loggedAs(dp, "upstream TLS file change refused; the previous files keep serving"),
    ).toEqual([]);
  }, 120_000);
});
