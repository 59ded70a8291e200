import type { IncomingHttpHeaders } from "node:http";
import { create, type RouteSchema, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { compileSnapshot } from "./compile-snapshot.js";

/*
 * Names that are members of Object.prototype (or set it). Any of them used as a key of a plain
 * object reads or replaces something the user never configured; issue 8 item 1 was a header
 * condition named "constructor" matching Object itself and crashing every data plane.
 */
const PROTOTYPE_KEYS = [
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
] as const;

type RouteInit = NonNullable<Parameters<typeof create<typeof RouteSchema>>[1]>;

function compile(routes: RouteInit[], names: { upstream?: string; breaker?: string } = {}) {
  const upstream = names.upstream ?? "u";
  return compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      breakers: names.breaker === undefined ? [] : [{ name: names.breaker }],
      upstreams: [
        {
          name: upstream,
          breaker: names.breaker ?? "",
          nodes: [{ address: "127.0.0.1:1", weight: 1 }],
        },
      ],
      routes: routes.map((r) => ({ upstream, ...r })),
      tenants: PROTOTYPE_KEYS.map((name) => ({ name, allowedRoutes: [name] })),
    }),
  );
}

function compiled(routes: RouteInit[], names?: { upstream?: string; breaker?: string }) {
  const result = compile(routes, names);
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}

/** Request headers as node:http builds them: a plain object (Object.prototype behind it). */
function requestHeaders(entries: Record<string, string> = {}): IncomingHttpHeaders {
  const headers: IncomingHttpHeaders = {};
  for (const [name, value] of Object.entries(entries)) {
    Object.defineProperty(headers, name, { value, enumerable: true, writable: true });
  }
  return headers;
}

describe.each(PROTOTYPE_KEYS)("prototype key %s", (key) => {
  const lower = key.toLowerCase();

  it("as a header condition: matches only a request that sends that header", () => {
    const snapshot = compiled([
      { name: "gated", match: { pathPrefix: "/", headers: [{ name: key, value: "yes" }] } },
      { name: "open", match: { pathPrefix: "/" } },
    ]);
    // Without the header the inherited member must not count as a value (it used to throw).
    expect(snapshot.match("GET", "a.example", "/", requestHeaders())?.name).toBe("open");
    expect(snapshot.match("GET", "a.example", "/", requestHeaders({ [lower]: "no" }))?.name).toBe(
      "open",
    );
    expect(snapshot.match("GET", "a.example", "/", requestHeaders({ [lower]: "yes" }))?.name).toBe(
      "gated",
    );
  });

  it("as a header condition alone: no request without it matches, none throws", () => {
    const snapshot = compiled([
      { name: "gated", match: { pathPrefix: "/", headers: [{ name: key, value: "yes" }] } },
    ]);
    expect(snapshot.match("GET", "a.example", "/", requestHeaders())).toBeUndefined();
    expect(
      snapshot.match("GET", "a.example", "/", requestHeaders({ "x-other": "yes" })),
    ).toBeUndefined();
  });

  it("as a request header the routes do not name: ignored", () => {
    const snapshot = compiled([
      { name: "beta", match: { pathPrefix: "/", headers: [{ name: "x-beta", value: "1" }] } },
      { name: "open", match: { pathPrefix: "/" } },
    ]);
    expect(snapshot.match("GET", "a.example", "/", requestHeaders({ [lower]: "1" }))?.name).toBe(
      "open",
    );
  });

  it("as a request host: routes to host-less routes unless a route names it", () => {
    const snapshot = compiled([{ name: "open", match: { pathPrefix: "/" } }]);
    expect(snapshot.match("GET", key, "/", requestHeaders())?.name).toBe("open");
    expect(snapshot.match("GET", `${key}:8080`, "/", requestHeaders())?.name).toBe("open");
    const hostOnly = compiled([
      { name: "named", match: { pathPrefix: "/", hosts: ["a.example"] } },
    ]);
    expect(hostOnly.match("GET", key, "/", requestHeaders())).toBeUndefined();
  });

  it("as a route host: a host name is served, anything else is refused with a reason", () => {
    const result = compile([{ name: "named", match: { pathPrefix: "/", hosts: [key] } }]);
    if (!/^[a-z]+$/i.test(key)) {
      expect(result).toMatchObject({
        ok: false,
        reason: expect.stringContaining("match.hosts.0"),
      });
      return;
    }
    if (!result.ok) throw new Error(result.reason);
    expect(result.value.match("GET", key.toUpperCase(), "/", requestHeaders())?.name).toBe("named");
    expect(result.value.match("GET", "other.example", "/", requestHeaders())).toBeUndefined();
    // The wildcard tier, too.
    const wild = compiled([{ name: "wild", match: { pathPrefix: "/", hosts: [`*.${lower}`] } }]);
    expect(wild.match("GET", `a.${lower}`, "/", requestHeaders())?.name).toBe("wild");
    expect(wild.match("GET", lower, "/", requestHeaders())).toBeUndefined();
  });

  it("as a route, upstream and breaker name: compiled when valid, else refused by name", () => {
    const valid = /^[a-z0-9][a-z0-9-]{0,62}$/.test(key);
    const result = compile([{ name: key, match: { pathPrefix: "/" } }], {
      upstream: key,
      breaker: key,
    });
    if (!valid) {
      expect(result).toMatchObject({ ok: false, reason: expect.stringContaining(key) });
      return;
    }
    if (!result.ok) throw new Error(result.reason);
    const route = result.value.match("GET", "a.example", "/x", requestHeaders());
    expect(route?.name).toBe(key);
    expect(route?.targets[0]?.upstream.name).toBe(key);
    expect(route?.targets[0]?.upstream.breaker).toBe(key);
    expect(route?.targets[0]?.upstream.breakerPolicy?.name).toBe(key);
    expect(result.value.upstreams.get(key)?.nodes).toHaveLength(1);
  });

  it("as a path segment: matched like any other path", () => {
    const snapshot = compiled([
      { name: "exact", match: { path: `/${key}` } },
      { name: "prefix", match: { pathPrefix: `/${key}/` } },
    ]);
    expect(snapshot.match("GET", "a.example", `/${key}`, requestHeaders())?.name).toBe("exact");
    expect(snapshot.match("GET", "a.example", `/${key}/x`, requestHeaders())?.name).toBe("prefix");
    expect(snapshot.match("GET", "a.example", "/other", requestHeaders())).toBeUndefined();
  });
});
