import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  metricValue,
  type NamedUpstream,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  tally,
  waitFor,
} from "../support/index.js";

/** Serves requests as "b" but fails its health probe: only a probe eviction takes it out. */
async function startFailingProbeUpstream(): Promise<{ server: Server; address: string }> {
  const server = createServer((request, response) => {
    if (request.url === "/healthz") {
      response.writeHead(503).end();
      return;
    }
    response.writeHead(200, { "content-type": "application/json" });
    response.end(JSON.stringify({ upstream: "b" }));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

// The primary probes; its workers route. An eviction must reach every worker's picker.
describe("a data plane with workers: 2, one node failing its probes", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let a: NamedUpstream;
  let b: { server: Server; address: string };

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    a = await startNamedUpstream("a");
    teardown.add("upstream a", () => a.close());
    b = await startFailingProbeUpstream();
    teardown.add(
      "upstream b",
      () => new Promise<void>((resolve) => b.server.close(() => resolve())),
    );
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    await cp.admin.putUpstream("agents", {
      nodes: [
        { address: a.address, weight: 1 },
        { address: b.address, weight: 1 },
      ],
      healthCheck: { intervalMs: 1_000, unhealthyThreshold: 2 },
    });
    await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: "agents" });
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress, CLAWGATE_WORKERS: "2" });
    teardown.add("data plane", () => dp.stop());
  });

  afterAll(() => teardown.run());

  it("sends nothing to the evicted node from any worker", async () => {
    await waitFor(
      async () =>
        metricValue(await dp.metrics(), "clawgate_upstream_node_healthy", {
          upstream: "agents",
          node: b.address,
        }) === 0,
      { what: "b evicted by its probes", timeoutMs: 20_000 },
    );
    // Whichever worker a connection lands on, each must have heard of the eviction: one that
    // had not would send about half of these to b.
    expect(await tally(`${dp.proxyUrl}/api/x`, 40)).toEqual({ a: 40 });
  });
});
