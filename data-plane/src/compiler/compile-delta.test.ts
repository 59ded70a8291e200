import { create, SnapshotSchema } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import {
  compiledView,
  deltaOf,
  requestsFor,
  routeAt,
  snapshotOf,
  upstreamAt,
} from "../testing/delta-fixture.js";
import { compileDelta } from "./compile-delta.js";
import { compileSnapshot } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";
import { FrozenCompiledSnapshot } from "./frozen-compiled-snapshot.js";

const ROUTES = 60;
const UPSTREAMS = 8;
const requests = requestsFor(ROUTES + 10);

function compiled(result: CompileResult): FrozenCompiledSnapshot {
  if (!result.ok) throw new Error(result.reason);
  if (!(result.value instanceof FrozenCompiledSnapshot)) throw new Error("not a compiled snapshot");
  return result.value;
}

/** The same snapshot compiled whole from the delta result's own source. */
function compiledWhole(from: FrozenCompiledSnapshot): FrozenCompiledSnapshot {
  return compiled(compileSnapshot(create(SnapshotSchema, { ...from.source })));
}

describe("compileDelta", () => {
  it("gives what the whole snapshot gives, delta after delta", () => {
    let current = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const deltas = [
      // One route changed (a longer path) and one added.
      deltaOf(2, { routes: [routeAt(3, UPSTREAMS, 0, "/moved"), routeAt(ROUTES, UPSTREAMS)] }),
      // Routes removed, of every shape.
      deltaOf(3, { removedRoutes: ["r-0", "r-1", "r-2", "r-8", "r-9"] }),
      // An upstream's nodes move: every route sending to it must see the new nodes.
      deltaOf(4, { upstreams: [upstreamAt(2, 5, 1)] }),
      // A breaker policy changes: the upstreams naming it are compiled with the new one.
      deltaOf(5, {
        breakers: [{ $typeName: "clawgate.v1.BreakerPolicy", ...strict(9), fleetProbe: false }],
      }),
      // An upstream and the routes that send to it go together; a new upstream takes a route.
      deltaOf(6, {
        upstreams: [upstreamAt(UPSTREAMS, 2)],
        routes: [
          ...[7, 15, 23, 31, 39, 47, 55].map((i) => ({
            ...routeAt(i, UPSTREAMS),
            upstream: `u-${UPSTREAMS}`,
            split: [],
          })),
          routeAt(ROUTES + 1, UPSTREAMS),
        ],
        removedRoutes: [6, 14, 22, 30, 38, 46, 54].map((i) => `r-${i}`),
      }),
      // A route's priority changes: the same path now orders differently.
      deltaOf(7, { routes: [routeAt(13, UPSTREAMS, 5), routeAt(18, UPSTREAMS, 7)] }),
    ];
    for (const delta of deltas) {
      const next = compiled(compileDelta(current, delta));
      expect(compiledView(next, requests)).toEqual(compiledView(compiledWhole(next), requests));
      current = next;
    }
    expect(current.version).toBe(7);
  });

  it("stays equal to the whole snapshot over 300 deltas, through route-table tier rebuilds", () => {
    const routes = 12;
    let current = compiled(compileSnapshot(snapshotOf(1, routes, 3)));
    for (let change = 1; change <= 300; change++) {
      // Paths move, so prefixes are added and removed in every tier, again and again.
      const delta = deltaOf(change + 1, {
        routes: [routeAt(change % routes, 3, change % 4, `/g${change}`)],
        removedRoutes: change % 5 === 0 ? [`r-${(change + 1) % routes}`] : [],
      });
      current = compiled(compileDelta(current, delta));
      if (change % 50 === 0) {
        const few = requestsFor(routes).concat(
          Array.from({ length: routes }, (_, i) => ({
            method: "GET",
            host: `a.w${i % 4}.test`,
            path: `/w/g${change}`,
          })),
        );
        expect(compiledView(current, few)).toEqual(compiledView(compiledWhole(current), few));
      }
    }
  });

  it("reuses every compiled object the delta does not touch", () => {
    const base = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const before = new Map(requests.map((r) => [r, base.match(r.method, r.host, r.path, {})]));
    const next = compiled(compileDelta(base, deltaOf(2, { routes: [routeAt(4, UPSTREAMS, 3)] })));
    for (const [name, upstream] of base.upstreams) expect(next.upstreams.get(name)).toBe(upstream);
    for (const [r, route] of before) {
      const now = next.match(r.method, r.host, r.path, {});
      // r-4 now outranks its siblings on the same path; every other answer is the same object.
      if (route?.name === "r-4" || now?.name === "r-4") expect(now?.priority).toBe(3);
      else expect(now).toBe(route);
    }
  });

  it("recompiles the routes of a changed upstream, and only those", () => {
    const base = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const next = compiled(compileDelta(base, deltaOf(2, { upstreams: [upstreamAt(3, 4, 1)] })));
    expect(next.upstreams.get("u-3")?.nodes.map((n) => n.address)).toContain("127.2.3.4:80");
    for (const r of requests) {
      const old = base.match(r.method, r.host, r.path, {});
      const now = next.match(r.method, r.host, r.path, {});
      const touches = old?.targets.some((t) => t.upstream.name === "u-3") ?? false;
      if (touches) expect(now?.targets.map((t) => t.upstream)).toContain(next.upstreams.get("u-3"));
      else expect(now).toBe(old);
    }
  });

  it("refuses a delta on another version, and the base takes the right one afterwards", () => {
    const base = compiled(compileSnapshot(snapshotOf(5, ROUTES, UPSTREAMS)));
    const wrong = compileDelta(base, deltaOf(9, { routes: [routeAt(1, UPSTREAMS, 1)] }));
    expect(wrong.ok).toBe(false);
    if (!wrong.ok) expect(wrong.reason).toContain("is on version 8, not on 5");
    const right = compiled(compileDelta(base, deltaOf(6, { routes: [routeAt(1, UPSTREAMS, 1)] })));
    expect(right.version).toBe(6);
  });

  it.each([
    [
      "a route naming an upstream that does not exist",
      { routes: [{ ...routeAt(1, UPSTREAMS), upstream: "nowhere" }] },
      'route "r-1": upstream names upstream nowhere, which does not exist',
    ],
    [
      "removing an upstream that unchanged routes still send to",
      { removedUpstreams: ["u-1"] },
      "names upstream u-1, which does not exist",
    ],
    [
      "removing a breaker that unchanged upstreams still name",
      { removedBreakers: ["strict"] },
      "names breaker strict, which does not exist",
    ],
    [
      "a route with a malformed path",
      {
        routes: [
          {
            ...routeAt(1, UPSTREAMS),
            match: routeAt(1, UPSTREAMS).match && {
              ...routeAt(1, UPSTREAMS).match!,
              path: "no-slash",
            },
          },
        ],
      },
      'route "r-1": match.path must start with',
    ],
    [
      "a name both changed and removed",
      { routes: [routeAt(2, UPSTREAMS)], removedRoutes: ["r-2"] },
      "is both changed and removed",
    ],
  ])("refuses %s, naming it, and changes nothing", (_, init, expected) => {
    const base = compiled(compileSnapshot(snapshotOf(1, ROUTES, UPSTREAMS)));
    const view = compiledView(base, requests);
    const refused = compileDelta(base, deltaOf(2, init));
    expect(refused.ok).toBe(false);
    if (!refused.ok) expect(refused.reason).toContain(expected);
    expect(compiledView(base, requests)).toEqual(view);
    // The base still owns its index: the next good delta compiles on it as if nothing happened.
    const next = compiled(compileDelta(base, deltaOf(2, { routes: [routeAt(1, UPSTREAMS, 2)] })));
    expect(compiledView(next, requests)).toEqual(compiledView(compiledWhole(next), requests));
  });
});

function strict(consecutiveFailures: number) {
  return {
    name: "strict",
    windowMs: 0,
    minRequests: 0,
    failureRatio: 0,
    consecutiveFailures,
    cooldownMs: 0,
    cooldownMultiplier: 0,
    maxCooldownMs: 0,
    halfOpenMaxInFlight: 0,
    halfOpenSuccesses: 0,
  };
}
