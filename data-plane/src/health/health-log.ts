import type { Logger } from "pino";
import type { HealthChange } from "./node-health.js";
import { formatEvidence } from "./prober/probe-protocol.js";

const MESSAGE: Readonly<Record<HealthChange["to"], string>> = {
  healthy: "upstream node back in rotation",
  quarantined: "upstream node quarantined",
  evicted: "upstream node evicted",
};

/**
 * One line per state change, with what the probe saw (seed 000 section 6: log the TCP time when a
 * node is taken out, so the journal can rebuild the chain of cause and effect). A node leaving
 * rotation is a warning; coming back is info.
 */
export function logHealthChange(logger: Logger, change: HealthChange): void {
  const { upstream, address, from, to, reason, evidence } = change;
  const fields = {
    upstream,
    node: address,
    from,
    to,
    reason,
    tcpMs: evidence.tcpMs,
    httpStatus: evidence.httpStatus,
    bodyStatus: evidence.bodyStatus,
    error: evidence.error,
    evidence: formatEvidence(evidence),
  };
  if (to === "healthy") logger.info(fields, MESSAGE[to]);
  else logger.warn(fields, MESSAGE[to]);
}
