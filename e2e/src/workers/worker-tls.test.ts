import { readFileSync } from "node:fs";
import { issueServerCertificate, makeTestPki, type TestPki } from "@clawgate/runtime/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type DataPlane,
  freePorts,
  httpsGet,
  metricSum,
  startWorkerGateway,
  Teardown,
  waitFor,
} from "../support/index.js";

// One story: each `it` builds on the state the one before left.
describe("the HTTPS listener of a data plane with workers: 2", () => {
  const teardown = new Teardown();
  let pki: TestPki;
  let ca: string;
  let dp: DataPlane;
  let tlsPort: number;

  beforeAll(async () => {
    pki = await makeTestPki();
    teardown.add("test PKI", () => pki.remove());
    ca = readFileSync(pki.caCert, "utf8");
    [tlsPort] = (await freePorts(1)) as [number];
    ({ dp } = await startWorkerGateway(teardown, {
      store: "embedded",
      dataPlaneEnv: {
        CLAWGATE_PROXY_TLS_LISTEN: `127.0.0.1:${tlsPort}`,
        CLAWGATE_PROXY_TLS_CERT_FILE: pki.serverCert,
        CLAWGATE_PROXY_TLS_KEY_FILE: pki.serverKey,
      },
    }));
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
