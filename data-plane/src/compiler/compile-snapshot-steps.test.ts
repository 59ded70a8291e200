import { describe, expect, it } from "vitest";
import { compiledView, requestsFor, snapshotOf } from "../testing/delta-fixture.js";
import { compileRouteTable } from "../testing/route-table-fixture.js";
import { compileSnapshot, compileSnapshotSteps, STEP_RESOURCES } from "./compile-snapshot.js";
import type { CompileResult } from "./compiled-types.js";
import { RouteTable } from "./route-table.js";

/** Runs steps to their end; answers what they return and how many times they paused. */
function run<T>(steps: Generator<void, T>): { value: T; pauses: number } {
  for (let pauses = 0; ; pauses++) {
    const step = steps.next();
    if (step.done) return { value: step.value, pauses };
  }
}

describe("compiling a whole snapshot in steps", () => {
  it("pauses every STEP_RESOURCES (50) resources in validation and in the route table too", () => {
    // 4,000 routes: validated (and their references), compiled, put in the route table and
    // frozen, 80 steps each. Validation and the table were one step each, then 20 each (200
    // resources a step: 20 to 35 ms of CPU on a data plane's cold boot).
    expect(STEP_RESOURCES).toBe(50);
    const { value, pauses } = run<CompileResult>(compileSnapshotSteps(snapshotOf(1, 4_000, 40)));
    expect(value.ok).toBe(true);
    expect(pauses).toBeGreaterThanOrEqual(5 * 80);
  });

  it("builds the route table in steps of the given number of paths", () => {
    const whole = compileSnapshot(snapshotOf(1, 3_000, 30));
    if (!whole.ok) throw new Error(whole.reason);
    const requests = requestsFor(3_000);
    // The compiled routes, as the whole snapshot's table finds them.
    const routes = [
      ...new Set(requests.map((r) => whole.value.match(r.method, r.host, r.path, {}))),
    ].filter((route) => route !== undefined);
    expect(routes.length).toBeGreaterThan(1_500);
    const { value: table, pauses } = run(RouteTable.buildSteps(routes, 50));
    // About 1,200 distinct paths share the tier of routes without a host (see routeAt).
    expect(pauses).toBeGreaterThanOrEqual(1_200 / 50);
    const bySteps = requests.map((r) => table.match(r.method, r.host, r.path, {})?.name);
    expect(bySteps).toEqual(
      requests.map((r) => whole.value.match(r.method, r.host, r.path, {})?.name),
    );
    expect(bySteps.filter((name) => name !== undefined).length).toBeGreaterThan(1_000);
  });

  it("pauses between host tiers, not only within one: 1,000 hosts of 2 routes each", () => {
    const init = Array.from({ length: 2_000 }, (_, i) => ({
      name: `r-${i}`,
      match: { pathPrefix: `/p/${i}`, hosts: [`h${i % 1_000}.test`] },
    }));
    const compiled = compileRouteTable(init);
    const routes = init.map(
      (r) => compiled.match("GET", r.match.hosts[0]!, r.match.pathPrefix, {})!,
    );
    expect(new Set(routes.map((r) => r.name)).size).toBe(2_000);
    // Each tier is far below 50 paths: before, none paused, and the grouping by host neither,
    // so the 1,000 tiers were one step.
    const { value: table, pauses } = run(RouteTable.buildSteps(routes, 50));
    // 40 in the grouping, one every 5 tiers (2 paths and a tier weigh 12 of the 50).
    expect(pauses).toBeGreaterThanOrEqual(2_000 / 50 + 1_000 / 5);
    expect(table.match("GET", "h7.test", "/p/1007/x", {})?.name).toBe("r-1007");
  });

  it("compiles what compileSnapshot compiles", () => {
    const { value } = run<CompileResult>(compileSnapshotSteps(snapshotOf(2, 1_000, 20)));
    const whole = compileSnapshot(snapshotOf(2, 1_000, 20));
    if (!value.ok || !whole.ok) throw new Error("both compile");
    const requests = requestsFor(1_000);
    expect(compiledView(value.value, requests)).toEqual(compiledView(whole.value, requests));
  });
});
