import type { BreakerPolicy, Tenant } from "@clawgate/proto";

/** The resources of a snapshot or delta that this check reads. */
interface Resources {
  readonly tenants: readonly Tenant[];
  readonly breakers: readonly BreakerPolicy[];
}

/**
 * Why a data plane with `workers` > 1 refuses (NACKs) this config, or undefined when it can
 * serve it. Fleet-wide tenant budgets and coordinated half-open probes both need the snapshot
 * stream, which only the primary holds, and the request path (policies, breakers), which only
 * the workers run: a worker would hold a tenant to nothing (or to a per-worker count, N times
 * the limit) and probe on its own. Serving such a config would break a promise silently;
 * refusing it says so where operators look (NACKED, with this reason, in clawctl status).
 */
export function unheldInWorkers(config: Resources, workers: number): string | undefined {
  const limited = config.tenants.find(
    (tenant) =>
      tenant.requestsPerMinute > 0 || tenant.tokensPerMinute > 0n || tenant.tokensPerDay > 0n,
  );
  if (limited !== undefined) {
    return (
      `tenant "${limited.name}" has a fleet-wide limit (requestsPerMinute, tokensPerMinute or ` +
      `tokensPerDay), which a data plane with workers=${workers} cannot hold: run it with workers=1`
    );
  }
  const probed = config.breakers.find((breaker) => breaker.fleetProbe);
  if (probed !== undefined) {
    return (
      `breaker "${probed.name}" has fleetProbe, which a data plane with workers=${workers} ` +
      "cannot coordinate: run it with workers=1"
    );
  }
  return undefined;
}
