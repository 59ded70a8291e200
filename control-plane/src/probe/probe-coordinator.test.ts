import { describe, expect, it } from "vitest";
import {
  ProbeCoordinator,
  type ProbeParty,
  type ProbeVerdictMessage,
} from "./probe-coordinator.js";

function party(id: string): ProbeParty & { got: ProbeVerdictMessage[] } {
  const got: ProbeVerdictMessage[] = [];
  return { id, nodeId: id, got, send: (verdict) => got.push(verdict) };
}

describe("ProbeCoordinator", () => {
  it("names the first claimant the prober and tells the others its outcome", () => {
    const clock = { now: 0 };
    const probes = new ProbeCoordinator({ now: () => clock.now, leaseMs: 1_000 });
    const a = party("a");
    const b = party("b");
    probes.claim(a, "models");
    probes.claim(b, "models");
    expect(a.got.at(-1)).toMatchObject({ prober: "a" });
    expect(b.got.at(-1)).toMatchObject({ prober: "a" });
    probes.release(b, "models", true); // not the prober: ignored
    expect(b.got).toHaveLength(1);
    probes.release(a, "models", true);
    expect(b.got.at(-1)).toMatchObject({ prober: "", outcome: "success" });
  });

  it("hands a lapsed claim to the next claimant, so a silent prober stalls nobody", () => {
    const clock = { now: 0 };
    const probes = new ProbeCoordinator({ now: () => clock.now, leaseMs: 1_000 });
    const a = party("a");
    const b = party("b");
    probes.claim(a, "models");
    clock.now = 999;
    probes.claim(b, "models");
    expect(b.got.at(-1)).toMatchObject({ prober: "a" });
    clock.now = 1_000;
    probes.claim(b, "models");
    expect(b.got.at(-1)).toMatchObject({ prober: "b" });
  });

  it("frees the probe of a data plane whose stream ended, with no outcome", () => {
    const probes = new ProbeCoordinator({ now: () => 0 });
    const a = party("a");
    const b = party("b");
    probes.claim(a, "models");
    probes.claim(b, "models");
    probes.leave(a);
    expect(b.got.at(-1)).toMatchObject({ prober: "", outcome: "" });
    probes.claim(b, "models");
    expect(b.got.at(-1)).toMatchObject({ prober: "b" });
  });
});
