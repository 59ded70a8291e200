/**
 * Bounds on what a data plane may send on the snapshot stream. The control plane enforces
 * them (a stream from an unauthenticated client must not be able to grow its memory), and a
 * data plane can read them to stay inside. Lengths count UTF-16 code units, as JS strings do.
 */
export const STREAM_LIMITS = {
  /** Hello.nodeId: the data plane's own nodeId setting allows 1-253 characters. */
  nodeIdLength: 253,
  /** Hello.hostname: the longest DNS name. */
  hostnameLength: 253,
  /** Hello.softwareVersion: a semver with build metadata fits many times over. */
  softwareVersionLength: 128,
  /** Ack.nonce and Nack.nonce: the control plane's nonce is its instanceId (<= 200) and a version. */
  nonceLength: 256,
  /** Nack.errorDetail is free text: kept and logged only up to this length, never refused. */
  nackDetailLength: 2048,
  /**
   * NodeHealthReport.nodes: a data plane reports every node of its config, and a config of
   * 20,000 nodes is one the gateway is built for (issue 9's scale target); 2.5x that.
   */
  healthNodes: 50_000,
  /** NodeHealth.upstream: a resource name is at most 63 characters. */
  healthUpstreamLength: 63,
  /** NodeHealth.address: a 253-character host, a colon and a port, or a bracketed IPv6. */
  healthAddressLength: 261,
  /** NodeHealth.state: one of "healthy", "quarantined", "evicted". */
  healthStateLength: 16,
  /** NodeHealth.evidence is free text: kept only up to this length, never refused. */
  healthEvidenceLength: 256,
  /**
   * QuotaUsage.entries: one a tenant and budget kind with something to report, and a data
   * plane reports at most every few hundred milliseconds; 3 kinds for 10,000 busy tenants.
   */
  quotaEntries: 30_000,
  /** QuotaConsumption.tenant, ProbeClaim.upstream, BreakerState.upstream: resource names, at most 63 characters. */
  resourceNameLength: 63,
  /**
   * BreakerReport.breakers: one an upstream whose breaker is not closed; a config of 20,000
   * upstreams all open at once, 2.5x over, like healthNodes.
   */
  breakerStates: 50_000,
} as const;
