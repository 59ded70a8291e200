import { describe, expect, it } from "vitest";
import { probeTarget } from "../../testing/probe-target.js";
import type { ProbeTarget } from "./probe-protocol.js";
import { keepForReplay, replayed } from "./replay-targets.js";

/** One object, as an upstream's nodes share their upstream's TLS settings. */
const TLS = {
  servername: "agents.example",
  files: { contextKey: "k" },
  rejectUnauthorized: true,
};

function target(address: string, overrides: Partial<ProbeTarget> = {}): ProbeTarget {
  return probeTarget(address, { intervalMs: 10_000, timeoutMs: 3_000, tls: TLS, ...overrides });
}

describe("keepForReplay", () => {
  it.each([
    ["nodes of one health check", [target("10.0.0.1:80"), target("10.0.0.2:81")], "addresses"],
    ["one node", [target("10.0.0.1:80")], "addresses"],
    [
      "nodes whose settings differ",
      [target("10.0.0.1:80"), target("10.0.0.2:80", { timeoutMs: 50 })],
      "list",
    ],
    [
      "a node without TLS after one with it",
      [target("10.0.0.1:80"), { ...target("10.0.0.2:80"), tls: undefined }],
      "list",
    ],
    [
      "a node with a key the first lacks, the first holding one as undefined that it lacks",
      [
        { ...target("10.0.0.1:80"), tls: undefined },
        (({ tls: _, ...rest }) => ({ ...rest, extra: "kept" }))(
          target("10.0.0.2:80"),
        ) as unknown as ProbeTarget,
      ],
      "list",
    ],
    ["no nodes", [], "list"],
  ] as const)("gives back %s field for field", (_name, targets, kept) => {
    const stored = keepForReplay(targets);
    expect(kept in stored).toBe(true);
    expect(replayed(stored)).toEqual(targets);
  });

  it("keeps one object an upstream, not one a node, when the settings are shared", () => {
    const targets = Array.from({ length: 100 }, (_, i) => target(`10.0.0.${i}:80`));
    const stored = keepForReplay(targets);
    // Only the first target is held; the rest are strings and numbers in three arrays.
    const objects = Object.values(stored)
      .flat()
      .filter((v) => typeof v === "object");
    expect(objects).toEqual([targets[0]]);
  });
});
