import type { ProbeCoordination, ProbeParty } from "./probe-coordination.js";

/**
 * Keeps names a data plane sends to the upstreams of the published snapshot, so a data plane
 * cannot make the coordinator (or the store) hold state for any string it likes. A data plane
 * still on a snapshot with an upstream since removed is named its own prober and holds no claim:
 * it probes alone, as it would without a control plane.
 */
export function publishedUpstreamsOnly(
  probes: ProbeCoordination,
  isPublished: (upstream: string) => boolean,
): ProbeCoordination {
  return {
    claim(party: ProbeParty, upstream: string) {
      if (isPublished(upstream)) probes.claim(party, upstream);
      else party.send({ upstream, prober: party.nodeId, outcome: "", leaseMs: 0 });
    },
    release(party: ProbeParty, upstream: string, success: boolean) {
      if (isPublished(upstream)) probes.release(party, upstream, success);
    },
    leave: (party) => probes.leave(party),
  };
}

/** Whether a name is an upstream of `upstreams()`; the index is rebuilt only when that list changes. */
export function upstreamNamed(
  upstreams: () => readonly { readonly name: string }[],
): (name: string) => boolean {
  let indexed: readonly { readonly name: string }[] | undefined;
  let names = new Set<string>();
  return (name) => {
    const current = upstreams();
    if (current !== indexed) {
      indexed = current;
      names = new Set(current.map((upstream) => upstream.name));
    }
    return names.has(name);
  };
}
