import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  sendRawPath,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
} from "./support/index.js";

// Issue 8 item 2, as a first user met it: a route that publishes /docs as the backend's
// /v2/public-api/ let `curl --path-as-is $PROXY/docs/../../admin/secret` reach /admin/secret.
describe("path normalization: dot-segments cannot climb out of a rewritten route", () => {
  const teardown = new Teardown();
  let etcd: EtcdProcess;
  let cp: ControlPlane;
  let dp: DataPlane;
  let backend: NamedUpstream;

  beforeAll(async () => {
    etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    backend = await startNamedUpstream("backend");
    teardown.add("backend", () => backend.close());
    cp = await startControlPlane({ CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint });
    teardown.add("control plane", () => cp.stop());
    const write = await cp.admin.apply([
      { kind: "upstream", name: "backend", spec: { nodes: [{ address: backend.address }] } },
      {
        kind: "route",
        name: "docs",
        spec: {
          match: { pathPrefix: "/docs" },
          upstream: "backend",
          rewrite: { pathPrefix: "/v2/public-api/" },
        },
      },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    teardown.add("data plane", () => dp.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
  });

  afterAll(() => teardown.run());

  it("serves the published path under the rewrite", async () => {
    const reply = await sendRawPath(dp.proxyUrl, "/docs/guide?page=2");
    expect(reply.status).toBe(200);
    expect(backend.paths.at(-1)).toBe("/v2/public-api/guide?page=2");
  });

  it("never lets /docs/../../admin/secret, in any spelling, reach the backend's /admin/secret", async () => {
    const before = backend.paths.length;
    const climbs = [
      "/docs/../../admin/secret",
      "/docs/%2e%2e/%2e%2e/admin/secret",
      "/docs/%2E./.%2e/admin/secret",
      "/docs//..//..//admin/secret",
    ];
    for (const path of climbs) {
      // Normalized to /admin/secret, which no route publishes.
      const reply = await sendRawPath(dp.proxyUrl, path);
      expect(reply.status, path).toBe(404);
      expect((reply.json as { error: { code: string } }).error.code).toBe(
        "CLAWGATE_ROUTE_NOT_FOUND",
      );
    }
    // Dot-segments inside the route stay inside it.
    const inside = await sendRawPath(dp.proxyUrl, "/docs/a/../b/./c");
    expect(inside.status).toBe(200);
    expect(backend.paths.slice(before)).toEqual(["/v2/public-api/b/c"]);
  });

  it("answers 400 to what cannot be normalized safely, and sends none of it upstream", async () => {
    const before = backend.paths.length;
    const refused = [
      "/docs/..%2F..%2Fadmin/secret",
      "/docs/a%2fb",
      "/docs/..;/..;/admin/secret",
      "/docs/..%5C..%5Cadmin",
      "/docs/%zz",
      "/docs/%c0%ae%c0%ae/admin",
      "/docs/a%00",
    ];
    for (const path of refused) {
      const reply = await sendRawPath(dp.proxyUrl, path);
      expect(reply.status, path).toBe(400);
      expect((reply.json as { error: { code: string } }).error.code).toBe("CLAWGATE_BAD_REQUEST");
    }
    expect(backend.paths.slice(before)).toEqual([]);
  });
});
