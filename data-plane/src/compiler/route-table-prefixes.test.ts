import { describe, expect, it } from "vitest";
import { compileRouteTable, type RouteInit } from "../testing/route-table-fixture.js";

const table = compileRouteTable;

// Prefixes that share characters but not segments: a tree on characters must still respect
// segment boundaries, and fall back to a shorter prefix when a longer one does not hold.
describe("prefixes that share characters", () => {
  const compiled = table([
    { name: "root", match: { pathPrefix: "/" } },
    { name: "api", match: { pathPrefix: "/api" } },
    { name: "api-dir", match: { pathPrefix: "/api/" } },
    { name: "apix", match: { pathPrefix: "/apix" } },
    { name: "ap", match: { pathPrefix: "/ap" } },
    { name: "a-b-c-d-e", match: { pathPrefix: "/a/b/c/d/e" } },
    { name: "a-b", match: { pathPrefix: "/a/b" } },
    { name: "a-b-c-exact", match: { path: "/a/b/c" } },
    { name: "get-only", match: { pathPrefix: "/a/b/c/d", methods: ["GET"] } },
  ]);

  it.each<[string, string, string, string]>([
    ["/api alone", "GET", "/api", "api"],
    ["/api/ goes to the / ending prefix", "GET", "/api/", "api-dir"],
    ["/api/x goes to the longer / ending prefix", "GET", "/api/x", "api-dir"],
    ["/apix is its own prefix", "GET", "/apix", "apix"],
    ["/apix/y under /apix", "GET", "/apix/y", "apix"],
    ["/apixy matches neither /apix nor /api nor /ap", "GET", "/apixy", "root"],
    ["/ap matches itself", "GET", "/ap", "ap"],
    ["/apa is not under /ap", "GET", "/apa", "root"],
    ["/ alone", "GET", "/", "root"],
    ["deep prefix", "GET", "/a/b/c/d/e/f/g", "a-b-c-d-e"],
    [
      "deep prefix, broken last segment, falls back past a failed method",
      "POST",
      "/a/b/c/d/ee",
      "a-b",
    ],
    ["method holds on the intermediate prefix", "GET", "/a/b/c/d/ee", "get-only"],
    ["exact in the middle of a prefix chain", "GET", "/a/b/c", "a-b-c-exact"],
    ["exact does not extend", "GET", "/a/b/c/x", "a-b"],
    ["a shorter path than any branch", "GET", "/a", "root"],
  ])("%s", (_, method, path, expected) => {
    expect(compiled.match(method, "h.test", path, {})?.name).toBe(expected);
  });

  it("answers nothing when no prefix holds and there is no root route", () => {
    const narrow = table([
      { name: "api", match: { pathPrefix: "/api" } },
      { name: "apiv", match: { pathPrefix: "/api/v" } },
    ]);
    expect(narrow.match("GET", "h", "/apiv", {})).toBeUndefined();
    expect(narrow.match("GET", "h", "/", {})).toBeUndefined();
    expect(narrow.match("GET", "h", "/api/vx", {})?.name).toBe("api");
    expect(narrow.match("GET", "h", "/api/v/x", {})?.name).toBe("apiv");
  });

  it("finds each of many siblings under one parent", () => {
    const siblings = Array.from({ length: 500 }, (_, i) => ({
      name: `s${i}`,
      match: { pathPrefix: `/svc/s${i}` },
    }));
    const many = table([{ name: "svc", match: { pathPrefix: "/svc" } }, ...siblings]);
    for (const i of [0, 1, 10, 49, 100, 499]) {
      expect(many.match("GET", "h", `/svc/s${i}/x`, {})?.name).toBe(`s${i}`);
      expect(many.match("GET", "h", `/svc/s${i}`, {})?.name).toBe(`s${i}`);
    }
    // "/svc/s1" must not capture "/svc/s1000" or "/svc/s10x".
    expect(many.match("GET", "h", "/svc/s1000", {})?.name).toBe("svc");
    expect(many.match("GET", "h", "/svc/s10x/y", {})?.name).toBe("svc");
  });

  it("matches a wildcard host tier at every depth, longest suffix first", () => {
    const hosts = table([
      { name: "com", match: { pathPrefix: "/", hosts: ["*.com"] } },
      { name: "example", match: { pathPrefix: "/", hosts: ["*.example.com"] } },
      { name: "a-example", match: { pathPrefix: "/only", hosts: ["*.a.example.com"] } },
    ]);
    expect(hosts.match("GET", "x.a.example.com", "/only", {})?.name).toBe("a-example");
    expect(hosts.match("GET", "x.a.example.com", "/other", {})?.name).toBe("example");
    expect(hosts.match("GET", "a.example.com", "/only", {})?.name).toBe("example");
    expect(hosts.match("GET", "example.com", "/", {})?.name).toBe("com");
    expect(hosts.match("GET", "com", "/", {})).toBeUndefined();
  });
});

// The table must agree with the rule as written (route-table.ts header) on any input: this
// reference scans every route, which is what the indexes exist to avoid.
describe("agrees with a route-by-route scan", () => {
  const segments = ["a", "ab", "b", "api", "apix", "v1", "v10", ""];
  const pick = (seed: () => number, list: readonly string[]) =>
    list[Math.floor(seed() * list.length)]!;
  const randomPath = (seed: () => number) => {
    const depth = 1 + Math.floor(seed() * 4);
    let path = "";
    for (let i = 0; i < depth; i++) path += `/${pick(seed, segments)}`;
    return path.replace(/\/+/g, "/");
  };

  it("on 3,000 random requests against 300 random routes", () => {
    let state = 42;
    // A fixed linear congruential generator, so a failure replays the same way.
    const seed = () => {
      state = (state * 1103515245 + 12345) % 2147483648;
      return state / 2147483648;
    };
    const routes: RouteInit[] = [];
    const seen = new Set<string>();
    for (let i = 0; routes.length < 300; i++) {
      const path = randomPath(seed);
      const exact = seed() < 0.3;
      const slashEnded = seed() < 0.2 && path !== "/";
      const value = slashEnded ? `${path}/`.replace(/\/+/g, "/") : path;
      const methods = seed() < 0.2 ? ["POST"] : [];
      const hosts = seed() < 0.3 ? [pick(seed, ["a.test", "*.test", "*.b.test"])] : [];
      const key = `${exact}${value}${methods}${hosts}`;
      if (seen.has(key)) continue;
      seen.add(key);
      routes.push({
        name: `r${i}`,
        priority: Math.floor(seed() * 3),
        match: { ...(exact ? { path: value } : { pathPrefix: value }), methods, hosts },
      });
    }
    const compiled = table(routes);
    for (let i = 0; i < 3000; i++) {
      const path = seed() < 0.1 ? `${randomPath(seed)}/` : randomPath(seed);
      const method = seed() < 0.5 ? "GET" : "POST";
      const host = pick(seed, ["a.test", "x.test", "x.b.test", "other"]);
      expect(compiled.match(method, host, path, {})?.name, `${method} ${host} ${path}`).toBe(
        scan(routes, method, host, path),
      );
    }
  });
});

/** The matching rule, read literally: best host tier with any match, then best route in it. */
function scan(routes: RouteInit[], method: string, host: string, path: string) {
  const tiers: ((hosts: string[]) => number)[] = [
    (hosts) => (hosts.includes(host) ? 1 : 0),
    (hosts) => {
      let best = 0;
      for (const h of hosts) {
        if (h.startsWith("*.") && host.length > h.length - 1 && host.endsWith(h.slice(1))) {
          best = Math.max(best, h.length);
        }
      }
      return best;
    },
    (hosts) => (hosts.length === 0 ? 1 : 0),
  ];
  for (const tier of tiers) {
    // Within the wildcard tier, a longer suffix is a tier of its own.
    const scored = routes
      .map((route) => ({ route, score: tier(route.match?.hosts ?? []) }))
      .filter((entry) => entry.score > 0);
    const scores = [...new Set(scored.map((entry) => entry.score))].sort((a, b) => b - a);
    for (const score of scores) {
      const candidates = scored
        .filter((entry) => entry.score === score)
        .map((entry) => entry.route)
        .filter((route) => pathRank(route, path) >= 0)
        .filter((route) => {
          const methods = route.match?.methods ?? [];
          return methods.length === 0 || methods.includes(method);
        })
        .sort(
          (a, b) =>
            pathRank(b, path) - pathRank(a, path) ||
            Number((b.match?.methods?.length ?? 0) > 0) -
              Number((a.match?.methods?.length ?? 0) > 0) ||
            (b.priority ?? 0) - (a.priority ?? 0) ||
            (a.name! < b.name! ? -1 : a.name! > b.name! ? 1 : 0),
        );
      if (candidates.length > 0) return candidates[0]!.name;
    }
  }
  return undefined;
}

/** -1 when the route's path does not hold; else higher for a better path match. */
function pathRank(route: RouteInit, path: string): number {
  const exact = route.match?.path ?? "";
  // An exact path holds with or without one trailing "/".
  if (exact !== "")
    return withoutSlash(exact) === withoutSlash(path) ? Number.MAX_SAFE_INTEGER : -1;
  const prefix = route.match?.pathPrefix ?? "";
  if (!path.startsWith(prefix)) return -1;
  if (prefix.endsWith("/") || path.length === prefix.length || path[prefix.length] === "/") {
    return prefix.length;
  }
  return -1;
}

function withoutSlash(path: string): string {
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}
