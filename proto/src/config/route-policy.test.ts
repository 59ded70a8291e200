import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { RouteSchema, UpstreamSchema } from "../gen/clawgate/v1/config_pb.js";
import { parseCidr } from "./cidr.js";
import { routeProblems, upstreamProblems, validateResource } from "./validate-config.js";

const route = (extra: Record<string, unknown>) =>
  validateResource("routes", "r", { match: { pathPrefix: "/" }, upstream: "u", ...extra });
const fields = (result: ReturnType<typeof route>) =>
  result.ok ? [] : result.problems.map((problem) => problem.field);

describe("route policy fields", () => {
  it("fills the policy defaults: no auth, no CORS, no filters, no body limit", () => {
    const result = route({});
    if (!result.ok) throw new Error(JSON.stringify(result.problems));
    expect(result.document).toMatchObject({ ipAllow: [], ipDeny: [], maxBodyBytes: 0 });
    expect(result.document.auth).toBeUndefined();
    expect(result.document.cors).toBeUndefined();
    const cors = route({ cors: { allowOrigins: ["https://a.example"] } });
    expect(cors.ok && cors.document.cors?.maxAgeSeconds).toBe(600);
  });

  it.each([
    ["auth.tenants", { auth: { tenants: "sometimes" } }],
    ["ipAllow.0", { ipAllow: ["10.0.0.0/33"] }],
    ["ipDeny.1", { ipDeny: ["::1/128", "example.com"] }],
    [
      "requestHeaders.set.x-clawgate-tenant",
      { requestHeaders: { set: { "x-clawgate-tenant": "a" } } },
    ],
    ["requestHeaders.remove.0", { requestHeaders: { remove: ["Host"] } }],
    ["responseHeaders.set.x-a", { responseHeaders: { set: { "x-a": "a\r\nb" } } }],
    ["cors.allowCredentials", { cors: { allowOrigins: ["*"], allowCredentials: true } }],
    ["cors.allowOrigins.0", { cors: { allowOrigins: ["https://a.example/path"] } }],
    ["maxBodyBytes", { maxBodyBytes: -1 }],
    ["usage.injectStreamUsage", { usage: { injectStreamUsage: "yes" } }],
    ["usage.includeUsage", { usage: { includeUsage: true } }],
  ])("refuses a bad %s", (field, extra) => {
    expect(fields(route(extra))).toContain(field);
  });

  it("takes usage.injectStreamUsage, off unless it is said", () => {
    const on = route({ usage: { injectStreamUsage: true } });
    expect(on.ok && on.document.usage).toEqual({ injectStreamUsage: true });
    const empty = route({ usage: {} });
    expect(empty.ok && empty.document.usage).toEqual({ injectStreamUsage: false });
    const absent = route({});
    expect(absent.ok && absent.document.usage).toBeUndefined();
  });

  it("reads CIDRs of both families, a bare address as one host", () => {
    expect(parseCidr("10.0.0.0/8")).toEqual({
      ok: true,
      cidr: { address: "10.0.0.0", prefix: 8, family: "ipv4" },
    });
    expect(parseCidr("2001:db8::1")).toMatchObject({ ok: true, cidr: { prefix: 128 } });
    expect(parseCidr("10.0.0.0/")).toMatchObject({ ok: false });
  });

  it("the wire check refuses what the document check refuses", () => {
    const wire = create(RouteSchema, {
      name: "r",
      match: { pathPrefix: "/" },
      upstream: "u",
      auth: { tenants: "maybe" },
      ipDeny: ["300.0.0.1"],
      requestHeaders: { set: { host: "x" }, remove: [] },
      cors: { allowOrigins: [] },
    });
    expect(routeProblems(wire).map((problem) => problem.field)).toEqual([
      "auth.tenants",
      "ipDeny.0",
      "requestHeaders.set",
      "cors.allowOrigins",
    ]);
  });

  it("retryAfterScope is node, upstream or tenant; empty (an older control plane) is node", () => {
    expect(validateResource("upstreams", "u", { retryAfterScope: "everyone" }).ok).toBe(false);
    const upstream = (retryAfterScope: string) =>
      upstreamProblems(create(UpstreamSchema, { name: "u", retryAfterScope }));
    expect(upstream("")).toEqual([]);
    expect(upstream("tenant")).toEqual([]);
    expect(upstream("all").map((problem) => problem.field)).toEqual(["retryAfterScope"]);
  });
});
