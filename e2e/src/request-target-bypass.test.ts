import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type ControlPlane,
  type DataPlane,
  type NamedUpstream,
  rawHttpRequest,
  startControlPlane,
  startDataPlane,
  startNamedUpstream,
  Teardown,
  waitForConvergence,
} from "./support/index.js";

/*
 * Reviews 20c (High 2, Medium 4, Low 10) and 20a (Medium 3), as a client meets them: a route
 * with a policy (ipDeny of loopback, the test's own address) beside a catch-all to the same
 * backend. Spellings the backend reads as the guarded path (Tomcat, Jetty and Spring drop
 * ";x=1", frameworks drop "#x", most serve "/private/" as "/private") got past the policy via
 * the catch-all. Real processes; every request written byte for byte.
 */
describe("request targets that used to slip past a route's policy", () => {
  const teardown = new Teardown();
  let cp: ControlPlane;
  let dp: DataPlane;
  let backend: NamedUpstream;
  let proxy: string;

  beforeAll(async () => {
    backend = await startNamedUpstream("backend");
    teardown.add("backend", () => backend.close());
    cp = await startControlPlane();
    const started = cp;
    teardown.add("control plane", () => started.stop());
    const write = await cp.admin.apply([
      { kind: "upstream", name: "backend", spec: { nodes: [{ address: backend.address }] } },
      {
        kind: "route",
        name: "admin",
        spec: { match: { pathPrefix: "/admin" }, upstream: "backend", ipDeny: ["127.0.0.0/8"] },
      },
      {
        kind: "route",
        name: "private",
        spec: { match: { path: "/private" }, upstream: "backend", ipDeny: ["127.0.0.0/8"] },
      },
      {
        kind: "route",
        name: "wild",
        spec: { match: { pathPrefix: "/", hosts: ["*.example.com"] }, upstream: "backend" },
      },
      {
        kind: "route",
        name: "everything",
        spec: { match: { pathPrefix: "/" }, upstream: "backend" },
      },
    ]);
    dp = await startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress });
    const dataPlane = dp;
    teardown.add("data plane", () => dataPlane.stop());
    await waitForConvergence(cp, [dp], { atLeast: write.revision ?? 1 });
    proxy = new URL(dp.proxyUrl).host;
  });

  afterAll(() => teardown.run());

  function get(target: string, ...lines: string[]) {
    return rawHttpRequest(proxy, [`GET ${target} HTTP/1.1`, "Host: a.test", ...lines]);
  }

  function codeOf(body: string): string {
    return (JSON.parse(body) as { error: { code: string } }).error.code;
  }

  it("serves the catch-all and guards the routes with a policy", async () => {
    expect((await get("/public")).status).toBe(200);
    expect((await get("/admin/secret")).status).toBe(403);
    expect((await get("/private")).status).toBe(403);
  });

  it("answers 400 to a ';' path parameter or a '#' fragment, and sends none upstream", async () => {
    const before = backend.paths.length;
    for (const target of [
      "/admin;x=1/secret",
      "/admin;jsessionid=1",
      "/public;x=1",
      "/admin#x",
      "/admin/secret#x",
      "/public?q=1#x",
    ]) {
      const reply = await get(target);
      expect(reply.status, target).toBe(400);
      expect(codeOf(reply.body), target).toBe("CLAWGATE_BAD_REQUEST");
    }
    expect(backend.paths.slice(before)).toEqual([]);
    // Encoded, ";" is data: the route table and the backend read the same segment.
    expect((await get("/public%3Bx=1")).status).toBe(200);
  });

  it("holds an exact path's policy for it with a trailing slash too", async () => {
    const reply = await get("/private/");
    expect(reply.status).toBe(403);
    expect(codeOf(reply.body)).toBe("CLAWGATE_IP_DENIED");
    expect((await get("/private/below")).status).toBe(200);
  });

  it("answers 400 to a Host DNS could not hold, before any route is matched", async () => {
    const before = backend.paths.length;
    for (const host of [
      `${"a.".repeat(8_000)}example.com`,
      `${"a".repeat(254)}`,
      "a..example.com",
      ".example.com",
    ]) {
      const reply = await rawHttpRequest(proxy, ["GET /public HTTP/1.1", `Host: ${host}`]);
      expect(reply.status, host.slice(0, 20)).toBe(400);
      expect(codeOf(reply.body)).toBe("CLAWGATE_BAD_REQUEST");
    }
    expect(backend.paths.slice(before)).toEqual([]);
    const wild = await rawHttpRequest(proxy, ["GET /w HTTP/1.1", "Host: x.y.example.com"]);
    expect(wild.status).toBe(200);
  });

  it("answers 501 to a transfer coding other than chunked, and 200 to chunked alone", async () => {
    const before = backend.paths.length;
    const gzipped = await rawHttpRequest(
      proxy,
      ["POST /public HTTP/1.1", "Host: a.test", "Transfer-Encoding: gzip, chunked"],
      undefined,
      "0\r\n\r\n",
    );
    expect(gzipped.status).toBe(501);
    expect(codeOf(gzipped.body)).toBe("CLAWGATE_UNSUPPORTED_TRANSFER_CODING");
    expect(backend.paths.slice(before)).toEqual([]);
    const chunked = await rawHttpRequest(
      proxy,
      ["POST /public HTTP/1.1", "Host: a.test", "Transfer-Encoding: chunked"],
      undefined,
      "0\r\n\r\n",
    );
    expect(chunked.status).toBe(200);
  });
});
