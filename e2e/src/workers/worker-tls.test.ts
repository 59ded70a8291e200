import { readFileSync } from "node:fs";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  freePorts,
  httpsGet,
  metricSum,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
  waitForConvergence,
  waitForWorkers,
} from "../support/index.js";

// One story: each `it` builds on the state the one before left.
describe("the HTTPS listener of a data plane with workers: 2", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let ca: string;
  let cp: ControlPlane;
  let dp: DataPlane;
  let tlsPort: number;
  let upstream: NamedUpstream;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    ca = readFileSync(pki.caCert, "utf8");
    upstream = await startNamedUpstream("a");
    teardown.add("upstream", () => upstream.close());
    cp = await startControlPlane({});
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address }] });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    [tlsPort] = (await freePorts(1)) as [number];
    dp = await startDataPlane(
      {
        CLAWGATE_CP_ADDRESSES: cp.grpcAddress,
        CLAWGATE_WORKERS: "2",
        CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
        CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      },
      { readyTimeoutMs: 60_000 },
    );
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp]);
    await waitForWorkers(dp, 2);
  }, 180_000);

  afterAll(() => teardown.run());

  it("serves HTTPS in the workers: every request counted once in the aggregated /metrics", async () => {
    const before = metricSum(await dp.metrics(), "clawgate_requests_total");
    const statuses: number[] = [];
    for (let i = 0; i < 20; i++) statuses.push((await httpsGet(tlsPort, "/api/x", ca)).status);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // The workers' series are the ones /metrics sums: a request served anywhere else is missed.
    expect(metricSum(await dp.metrics(), "clawgate_requests_total")).toBe(before + 20);
    expect(dp.process.output.grep('"proxy worker listening"').join("\n")).toContain(
      `"tlsAddress":"127.0.0.1:${tlsPort}"`,
    );
  });

  it("serves a renewed certificate from every worker", async () => {
    // Written over the files in place, as a renewal would; both are checked as a pair.
    await issueServerCertificate(pki, "server", "DNS:renewed.test, IP:127.0.0.1");
    await waitFor(
      async () => (await httpsGet(tlsPort, "/api/x", ca)).san.includes("renewed.test"),
      {
        what: "a connection presented the renewed certificate",
      },
    );
    // New connections take turns across the workers: none still presents the old one.
    await waitFor(
      async () => {
        for (let i = 0; i < 10; i++) {
          const reply = await httpsGet(tlsPort, "/api/x", ca);
          if (reply.status !== 200 || !reply.san.includes("renewed.test")) return false;
        }
        return true;
      },
      { what: "10 connections in a row presenting the renewed certificate" },
    );
    const reloads = dp.process.output.grep('"proxy TLS certificate reloaded"');
    // Each worker watches the files and logs its own reload.
    const workers = new Set(
      reloads.map((line) => (JSON.parse(line) as { worker?: number }).worker),
    );
    expect([...workers].filter((w) => w !== undefined)).toHaveLength(2);
  });
});
