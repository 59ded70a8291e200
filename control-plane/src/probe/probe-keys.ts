/**
 * Where the control-plane replicas share half-open probes: `{prefix}meta/probes/claim/{upstream}`
 * holds who probes (bound to the claim's lease, so a lost replica's claim lapses) and
 * `{prefix}meta/probes/verdict/{upstream}` the outcome of the last probe (bound to the same lease,
 * so it goes soon after). Under meta/, which the snapshot builder ignores. Upstream names are
 * resource names ([a-z0-9-]) of the published snapshot, so they never nest keys.
 */

export function probesPrefix(prefix: string): string {
  return `${prefix}meta/probes/`;
}

export function probeClaimKey(prefix: string, upstream: string): string {
  return `${probesPrefix(prefix)}claim/${upstream}`;
}

export function probeVerdictKey(prefix: string, upstream: string): string {
  return `${probesPrefix(prefix)}verdict/${upstream}`;
}

/** The key's kind and upstream, or undefined for a key that is neither. */
export function parseProbeKey(
  prefix: string,
  key: string,
): { kind: "claim" | "verdict"; upstream: string } | undefined {
  const rest = key.startsWith(probesPrefix(prefix)) ? key.slice(probesPrefix(prefix).length) : "";
  const slash = rest.indexOf("/");
  const kind = rest.slice(0, slash);
  const upstream = rest.slice(slash + 1);
  if (slash < 0 || upstream === "" || (kind !== "claim" && kind !== "verdict")) return undefined;
  return { kind, upstream };
}
