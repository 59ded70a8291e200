import { describe, expect, it } from "vitest";
import { compileRouteTable } from "../testing/route-table-fixture.js";
import type { CompiledRoute } from "./compiled-types.js";
import { RouteCandidates } from "./route-candidates.js";

interface Init {
  name: string;
  priority?: number;
  methods?: string[];
  headers?: { name: string; value: string }[];
}

/** Compiled routes, each reached by its own path "/<name>" with a method and headers it takes. */
function compiled(routes: Init[]): Map<string, CompiledRoute> {
  const snapshot = compileRouteTable(
    routes.map(({ name, priority, methods, headers }) => ({
      name,
      priority: priority ?? 0,
      match: { path: `/${name}`, methods: methods ?? [], headers: headers ?? [] },
    })),
  );
  const byName = new Map<string, CompiledRoute>();
  for (const route of routes) {
    const method = route.methods?.[0] ?? "GET";
    const headers = Object.fromEntries((route.headers ?? []).map((h) => [h.name, h.value]));
    const found = snapshot.match(method, "h", `/${route.name}`, headers);
    if (found === undefined) throw new Error(`route ${route.name} did not compile`);
    byName.set(route.name, found);
  }
  return byName;
}

describe("route candidates (the routes sharing one path)", () => {
  const routes = compiled([
    { name: "plain" },
    { name: "plain-high", priority: 3 },
    { name: "posts", methods: ["POST"] },
    { name: "beta", headers: [{ name: "x-beta", value: "1" }] },
  ]);
  const get = (name: string) => routes.get(name) as CompiledRoute;

  it("has none for no routes", () => {
    expect(RouteCandidates.of([])).toBeUndefined();
  });

  it("gives the one route without conditions to every request", () => {
    const candidates = RouteCandidates.of([get("plain")]) as RouteCandidates;
    expect(candidates.pick("DELETE", { "x-beta": "1" })?.name).toBe("plain");
  });

  it("gives the highest priority among routes without conditions, whatever the input order", () => {
    for (const order of [
      ["plain", "plain-high"],
      ["plain-high", "plain"],
    ]) {
      const candidates = RouteCandidates.of(order.map(get)) as RouteCandidates;
      expect(candidates.pick("GET", {})?.name).toBe("plain-high");
    }
  });

  it("tries routes with conditions first and falls back to one without", () => {
    const input = [get("plain"), get("beta"), get("posts")];
    const candidates = RouteCandidates.of(input) as RouteCandidates;
    expect(candidates.routes.map((route) => route.name)).toEqual(["posts", "beta", "plain"]);
    expect(input.map((route) => route.name)).toEqual(["plain", "beta", "posts"]);
    expect(candidates.pick("POST", { "x-beta": "1" })?.name).toBe("posts");
    expect(candidates.pick("GET", { "x-beta": "1" })?.name).toBe("beta");
    expect(candidates.pick("GET", { "x-beta": ["0", "1"] })?.name).toBe("beta");
    expect(candidates.pick("GET", { "x-beta": "2" })?.name).toBe("plain");
  });

  it("gives nothing when every route has a condition the request misses", () => {
    const candidates = RouteCandidates.of([get("posts"), get("beta")]) as RouteCandidates;
    expect(candidates.pick("GET", {})).toBeUndefined();
    expect(candidates.pick("PUT", { "x-beta": "2" })).toBeUndefined();
  });
});
