import { describe, expect, it } from "vitest";
import { mixedSnapshotResponses } from "./snapshot-history.js";

// Route flips u1 {n1,n2} -> u2 {n5,n6}; u1 is then changed to {n3,n4} while unused; the route
// goes back to u1.
const reach = [
  new Set(["n1", "n2"]), // 0: route -> u1 {n1,n2}
  new Set(["n5", "n6"]), // 1: route -> u2
  new Set(["n5", "n6"]), // 2: u1 becomes {n3,n4}, unused
  new Set(["n3", "n4"]), // 3: route -> u1
];

describe("mixedSnapshotResponses", () => {
  it("accepts a client that moves forward through the states, lagging or skipping", () => {
    const seen = [
      { node: "n1", newestState: 1 },
      { node: "n2", newestState: 3 }, // the data plane still had state 0
      { node: "n3", newestState: 3 }, // and jumped straight to 3
      { node: "n4", newestState: 3 },
    ];
    expect(mixedSnapshotResponses(reach, seen)).toEqual([]);
  });

  it("flags the new route meeting the node list from before the change (the seed-001 race)", () => {
    const seen = [
      { node: "n5", newestState: 3 },
      { node: "n1", newestState: 3 }, // route -> u1 of state 3 with u1's nodes of state 0
    ];
    expect(mixedSnapshotResponses(reach, seen)).toEqual([
      "response 1 came from n1, but the route could only reach 1:{n5,n6} 2:{n5,n6} 3:{n3,n4}",
    ]);
  });

  it("flags a response from a state that had not been written yet", () => {
    expect(mixedSnapshotResponses(reach, [{ node: "n3", newestState: 2 }])).toHaveLength(1);
  });
});
