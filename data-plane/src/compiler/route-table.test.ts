import type { IncomingHttpHeaders } from "node:http";
import { describe, expect, it, vi } from "vitest";
import { compileRouteTable, type RouteInit } from "../testing/route-table-fixture.js";
import { RouteTable } from "./route-table.js";

const table = compileRouteTable;

const routes: RouteInit[] = [
  { name: "root", match: { pathPrefix: "/" } },
  { name: "api", match: { pathPrefix: "/api" } },
  { name: "api-v1", match: { pathPrefix: "/api/v1" } },
  { name: "api-health", match: { path: "/api/health" } },
  { name: "private", match: { path: "/private" } },
  { name: "docs-index", match: { path: "/docs/" } },
  { name: "static-dir", match: { pathPrefix: "/static/" } },
  { name: "example-api", match: { pathPrefix: "/api", hosts: ["API.example.com"] } },
  { name: "wild-api", match: { pathPrefix: "/api", hosts: ["*.example.com"] } },
  { name: "deep-wild", match: { pathPrefix: "/api", hosts: ["*.eu.example.com"] } },
  { name: "example-only", match: { path: "/only", hosts: ["api.example.com"] } },
  { name: "writes", match: { pathPrefix: "/items", methods: ["POST", "PUT"] } },
  { name: "items", match: { pathPrefix: "/items" } },
  {
    name: "beta-items",
    match: { pathPrefix: "/items", headers: [{ name: "X-Beta", value: "1" }] },
  },
  { name: "low", match: { path: "/tie" }, priority: 1 },
  { name: "high", match: { path: "/tie" }, priority: 5 },
  { name: "b-same", match: { path: "/same" } },
  { name: "a-same", match: { path: "/same" } },
];

describe("route matching", () => {
  const compiled = table(routes);

  it.each<[string, string, string, IncomingHttpHeaders, string | undefined]>([
    ["longest prefix wins", "GET", "/api/v1/users", {}, "api-v1"],
    ["shorter prefix when the longer does not apply", "GET", "/api/v2", {}, "api"],
    ["exact beats prefix", "GET", "/api/health", {}, "api-health"],
    ["exact is exact", "GET", "/api/health/deep", {}, "api"],
    ["exact matches with one trailing slash more", "GET", "/private/", {}, "private"],
    ["exact with a trailing slash matches without it", "GET", "/docs", {}, "docs-index"],
    ["exact with a trailing slash matches itself", "GET", "/docs/", {}, "docs-index"],
    ["exact still beats a prefix with the trailing slash", "GET", "/api/health/", {}, "api-health"],
    ["exact stays exact below it", "GET", "/private/x", {}, "root"],
    ["matching is case-sensitive", "GET", "/PRIVATE", {}, "root"],
    ["prefix matches itself", "GET", "/api", {}, "api"],
    ["segment boundary: /api does not match /apix", "GET", "/apix", {}, "root"],
    ["segment boundary: /api/v1 does not match /api/v10", "GET", "/api/v10", {}, "api"],
    ["a prefix ending in / matches any continuation", "GET", "/static/app.js", {}, "static-dir"],
    ["a prefix ending in / does not match without it", "GET", "/static", {}, "root"],
    ["query string is ignored", "GET", "/api/health?x=1", {}, "api-health"],
    ["method condition wins when it holds", "POST", "/items/1", {}, "writes"],
    ["method condition skipped when it fails", "GET", "/items/1", {}, "items"],
    ["header condition holds", "GET", "/items", { "x-beta": "1" }, "beta-items"],
    ["header condition value must be exact", "GET", "/items", { "x-beta": "2" }, "items"],
    ["method outranks headers", "PUT", "/items", { "x-beta": "1" }, "writes"],
    ["higher priority wins", "GET", "/tie", {}, "high"],
    ["name breaks ties", "GET", "/same", {}, "a-same"],
  ])("%s", (_, method, path, headers, expected) => {
    expect(compiled.match(method, "other.test", path, headers)?.name).toBe(expected);
  });

  it.each<[string, string, string, string | undefined]>([
    ["exact host, case and port ignored", "Api.Example.COM:8443", "/api/x", "example-api"],
    ["wildcard host", "www.example.com", "/api/x", "wild-api"],
    ["longer wildcard wins", "a.eu.example.com", "/api/x", "deep-wild"],
    ["wildcard does not match the bare domain", "example.com", "/api/x", "api"],
    ["host tier with no path match falls through", "api.example.com", "/other", "root"],
    ["host-specific route only for its host", "other.test", "/only", "root"],
    ["host-specific exact route", "api.example.com", "/only", "example-only"],
    ["trailing dot in the Host header", "api.example.com.", "/api", "example-api"],
  ])("%s", (_, host, path, expected) => {
    expect(compiled.match("GET", host, path, {})?.name).toBe(expected);
  });

  it("returns undefined when nothing matches", () => {
    const narrow = table([{ name: "only", match: { path: "/x", hosts: ["a.test"] } }]);
    expect(narrow.match("GET", "a.test", "/y", {})).toBeUndefined();
    expect(narrow.match("GET", "b.test", "/x", {})).toBeUndefined();
    expect(narrow.match("GET", "a.test", "/x", {})?.name).toBe("only");
  });

  it("does not depend on the order routes arrive in", () => {
    const reversed = table([...routes].reverse());
    for (const path of ["/api/v1/x", "/same", "/tie", "/items", "/apix"]) {
      expect(reversed.match("GET", "h", path, {})?.name).toBe(
        compiled.match("GET", "h", path, {})?.name,
      );
    }
  });
});

// Review 20c, Medium 4: every dot of the Host was a suffix hashed and looked up, so a Host of
// 8,000 labels cost ~150 ms of CPU. No suffix longer than the longest wildcard can match.
describe("wildcard hosts", () => {
  const wild = { name: "wild", match: { pathPrefix: "/", hosts: ["*.example.com"] } };
  const deep = { name: "deep", match: { pathPrefix: "/", hosts: ["*.eu.example.com"] } };

  /** How many wildcard suffixes (keys starting with ".") a match looks up. */
  function suffixLookups(match: () => unknown): number {
    const get = vi.spyOn(Map.prototype, "get");
    try {
      match();
      return get.mock.calls.filter(([key]) => typeof key === "string" && key.startsWith("."))
        .length;
    } finally {
      get.mockRestore();
    }
  }

  it("looks up only suffixes within the longest wildcard's length, whatever the Host's labels", () => {
    const compiled = table([wild]);
    const host = `${"a.".repeat(100)}example.com`;
    expect(compiled.match("GET", host, "/", {})?.name).toBe("wild");
    expect(suffixLookups(() => compiled.match("GET", host, "/", {}))).toBe(1);
    expect(compiled.match("GET", "example.com", "/", {})).toBeUndefined();
  });

  it("keeps the longest suffix when an update adds a longer wildcard", () => {
    const routes = table([wild, deep]);
    const wildRoute = routes.match("GET", "x.example.com", "/", {})!;
    const deepRoute = routes.match("GET", "x.eu.example.com", "/", {})!;
    const updated = RouteTable.build([wildRoute]).update([], [deepRoute]);
    expect(updated.match("GET", "x.eu.example.com", "/", {})?.name).toBe("deep");
    const shrunk = updated.update([deepRoute], []);
    expect(shrunk.match("GET", "x.eu.example.com", "/", {})?.name).toBe("wild");
  });
});
