import { describe, expect, it } from "vitest";
import type { ProbeParty, ProbeVerdictMessage } from "./probe-coordination.js";
import { ProbeCoordinator } from "./probe-coordinator.js";
import { publishedUpstreamsOnly, upstreamNamed } from "./published-upstreams-only.js";

function party(id: string): ProbeParty & { got: ProbeVerdictMessage[] } {
  const got: ProbeVerdictMessage[] = [];
  return { id, nodeId: id, got, send: (verdict) => got.push(verdict) };
}

describe("publishedUpstreamsOnly", () => {
  it("keeps no claim on a name outside the published snapshot: each claimant probes alone", () => {
    const published = [{ name: "models" }];
    const probes = publishedUpstreamsOnly(
      new ProbeCoordinator({ now: () => 0 }),
      upstreamNamed(() => published),
    );
    const a = party("a");
    const b = party("b");
    probes.claim(a, "no-such-upstream");
    probes.claim(b, "no-such-upstream");
    // Had a claim been kept, b would wait on a.
    expect(b.got.at(-1)).toMatchObject({ prober: "b" });
    probes.claim(a, "models");
    probes.claim(b, "models");
    expect(b.got.at(-1)).toMatchObject({ prober: "a" });
  });
});
