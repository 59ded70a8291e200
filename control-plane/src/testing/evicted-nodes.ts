import type { ReportedNodeHealth } from "../fleet/fleet.js";

/**
 * A data plane's health report after a rack is gone: `count` nodes, ten per upstream, all
 * evicted, as bench:scale drives it. At 20,000 nodes the JSON is about 3.5 MB, so it is the
 * report that is stored deflated.
 */
export function evictedNodes(
  count: number,
  evidence = (i: number) => `connect ECONNREFUSED ${i}`,
): ReportedNodeHealth[] {
  return Array.from(
    { length: count },
    (_, i): ReportedNodeHealth => ({
      upstream: `upstream-${Math.floor(i / 10)}`,
      address: `127.1.${Math.floor(i / 250)}.${i % 250}:9`,
      state: "evicted",
      evidence: evidence(i),
      changedAtMs: 1_764_547_200_000n + BigInt(i),
    }),
  );
}
