import { describe, expect, it } from "vitest";
import { inTurn } from "./round-order.js";

describe("inTurn", () => {
  it("starts each round one target later, so no target keeps its slot", () => {
    const targets = ["minimal", "clawgate", "clawgate-log-off"];
    expect([1, 2, 3, 4].map((round) => inTurn(targets, round))).toEqual([
      ["minimal", "clawgate", "clawgate-log-off"],
      ["clawgate", "clawgate-log-off", "minimal"],
      ["clawgate-log-off", "minimal", "clawgate"],
      ["minimal", "clawgate", "clawgate-log-off"],
    ]);
  });
});
