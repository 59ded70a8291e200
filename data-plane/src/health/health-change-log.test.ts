import type { NodeHealth } from "@clawgate/proto";
import { describe, expect, it } from "vitest";
import { HealthChangeLog } from "./health-change-log.js";
import type { HealthState } from "./node-health.js";

function message(address: string, state: HealthState): NodeHealth {
  return {
    $typeName: "clawgate.v1.NodeHealth",
    upstream: "agents",
    address,
    state,
    evidence: "",
    changedAtMs: 0n,
  };
}

const listed = (nodes: readonly NodeHealth[]) => nodes.map((n) => `${n.address} ${n.state}`);

describe("HealthChangeLog", () => {
  it("lists every change in order when nothing was removed, a node changing twice twice", () => {
    const log = new HealthChangeLog();
    log.changed("agents", "10.0.0.1:80", "absent", message("10.0.0.1:80", "healthy"));
    log.changed("agents", "10.0.0.2:80", "absent", message("10.0.0.2:80", "healthy"));
    log.changed("agents", "10.0.0.1:80", "healthy", message("10.0.0.1:80", "evicted"));
    const changes = log.take();
    expect(listed(changes?.nodes ?? [])).toEqual([
      "10.0.0.1:80 healthy",
      "10.0.0.2:80 healthy",
      "10.0.0.1:80 evicted",
    ]);
    expect(changes?.removed).toEqual([]);
  });

  it("forgets the removals it gave: the next report lists a node back since then", () => {
    const log = new HealthChangeLog();
    log.changed("agents", "10.0.0.1:80", "healthy", message("10.0.0.1:80", "evicted"));
    log.removed("agents", "10.0.0.1:80", "evicted");
    const first = log.take();
    expect(first?.nodes).toEqual([]);
    expect(first?.removed.map((n) => n.address)).toEqual(["10.0.0.1:80"]);

    log.changed("agents", "10.0.0.1:80", "absent", message("10.0.0.1:80", "healthy"));
    expect(listed(log.take()?.nodes ?? [])).toEqual(["10.0.0.1:80 healthy"]);
  });
});
