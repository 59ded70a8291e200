import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  httpStatus,
  type NamedUpstream,
  rawHttpRequest,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitFor,
} from "./support/index.js";

/*
 * Issue 8: a route whose header condition is named "constructor" was accepted, then crashed
 * every data plane on the first request it matched (and again after each restart, since the
 * snapshot is replayed from the cache). Requests with two Host lines or a Host with a bad port
 * were served. Real control plane, data plane and upstream; every request on the wire as typed.
 */
describe("hostile input: prototype-key header conditions and bad Host lines", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let upstream: NamedUpstream;
  let proxy: string;

  beforeAll(async () => {
    upstream = await startNamedUpstream("a");
    teardown.add("upstream a", () => upstream.close());
    cp = await startControlPlane();
    const started = cp;
    teardown.add("control plane", () => started.stop());
    // Up, not ready: the route under test is the first config it will get.
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress }, { waitUntil: "healthz" });
    const dataPlane = dp;
    teardown.add("data plane", () => dataPlane.stop());
    proxy = new URL(dp.proxyUrl).host;
  });

  afterAll(() => teardown.run());

  function assertAlive(): void {
    dp.process.assertRunning();
  }

  it("accepts a route with a constructor header condition and the data plane applies it", async () => {
    await cp.admin.putUpstream("agents", { nodes: [{ address: upstream.address, weight: 1 }] });
    const put = await cp.admin.putRoute("gated", {
      match: { pathPrefix: "/gated", headers: { constructor: "yes" } },
      upstream: "agents",
    });
    expect(put.status).toBe(201);
    await waitFor(async () => (await dp.snapshotVersion()) === put.revision, {
      what: `the data plane to apply version ${put.revision}`,
      timeoutMs: 20_000,
    });
  });

  it("answers 404 without the header and routes with it, and keeps serving", async () => {
    const without = await rawHttpRequest(proxy, ["GET /gated/x HTTP/1.1", "Host: a.test"]);
    expect(without.status).toBe(404);
    expect(JSON.parse(without.body).error.code).toBe("CLAWGATE_ROUTE_NOT_FOUND");

    const withHeader = await rawHttpRequest(proxy, [
      "GET /gated/x HTTP/1.1",
      "Host: a.test",
      "constructor: yes",
    ]);
    expect(withHeader.status).toBe(200);
    expect(JSON.parse(withHeader.body)).toMatchObject({ upstream: "a", path: "/gated/x" });

    const wrongValue = await rawHttpRequest(proxy, [
      "GET /gated/x HTTP/1.1",
      "Host: a.test",
      "Constructor: no",
    ]);
    expect(wrongValue.status).toBe(404);

    assertAlive();
    expect(await httpStatus(`${dp.adminUrl}/healthz`)).toBe(200);
    const again = await rawHttpRequest(proxy, [
      "GET /gated/again HTTP/1.1",
      "Host: a.test",
      "constructor: yes",
    ]);
    expect(again.status).toBe(200);
  });

  it.each([
    ["two Host lines", ["Host: a.test", "Host: b.test"]],
    ["a Host with a non-numeric port", ["Host: a.example:abc"]],
    ["a Host with a port above 65535", ["Host: a.example:65536"]],
  ])("answers 400 CLAWGATE_BAD_REQUEST to %s and serves on", async (_what, hostLines) => {
    const reply = await rawHttpRequest(proxy, [
      "GET /gated/x HTTP/1.1",
      ...hostLines,
      "constructor: yes",
    ]);
    expect(reply.status).toBe(400);
    expect(JSON.parse(reply.body).error.code).toBe("CLAWGATE_BAD_REQUEST");
    assertAlive();
    const good = await rawHttpRequest(proxy, [
      "GET /gated/x HTTP/1.1",
      "Host: a.example:8080",
      "constructor: yes",
    ]);
    expect(good.status).toBe(200);
  });
});
