import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { type Snapshot, SnapshotSchema } from "../gen/clawgate/v1/config_pb.js";
import { validateSnapshot, validateSnapshotSteps } from "./validate-config.js";

/** `routes` routes over `upstreams` upstreams of two nodes each, with a few bad ones. */
function snapshotWith(routes: number, upstreams: number): Snapshot {
  return create(SnapshotSchema, {
    version: 7n,
    breakers: [{ name: "default" }],
    upstreams: Array.from({ length: upstreams }, (_, i) => ({
      name: `u-${i}`,
      breaker: i === 3 ? "missing" : "default",
      nodes: [
        { address: `10.0.${i % 250}.1:80`, weight: 1 },
        { address: i === 5 ? "no port" : `10.0.${i % 250}.2:80`, weight: 1 },
      ],
    })),
    routes: Array.from({ length: routes }, (_, i) => ({
      name: `r-${i}`,
      match: i === 9 ? { path: "/a", pathPrefix: "/b" } : { pathPrefix: `/svc-${i}` },
      upstream: i === routes - 1 ? "nowhere" : `u-${i % upstreams}`,
    })),
  });
}

/** Runs the steps to their end; answers the problems and how many times they paused. */
function run(snapshot: Snapshot, every: number): { problems: unknown[]; pauses: number } {
  const steps = validateSnapshotSteps(snapshot, every);
  for (let pauses = 0; ; pauses++) {
    const step = steps.next();
    if (step.done) return { problems: step.value, pauses };
  }
}

describe("validateSnapshotSteps", () => {
  it("pauses after every `every` resources of each pass, not once for the whole snapshot", () => {
    // Names (2,401), upstreams weighed with their nodes (400 x 3), routes (2,000), then the
    // routes' and upstreams' references (2,400): 24 + 12 + 20 + 24 steps of 100 at least.
    const { pauses } = run(snapshotWith(2_000, 400), 100);
    expect(pauses).toBeGreaterThanOrEqual(78);
  });

  it("finds the problems validateSnapshot finds, in the same order", () => {
    const snapshot = snapshotWith(1_000, 50);
    const { problems } = run(snapshot, 7);
    expect(problems.length).toBeGreaterThanOrEqual(4);
    expect(problems).toEqual(validateSnapshot(snapshot));
    expect(JSON.stringify(problems)).toContain("names upstream nowhere");
    expect(JSON.stringify(problems)).toContain("names breaker missing");
  });
});
