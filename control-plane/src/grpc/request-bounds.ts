import type {
  Ack,
  BreakerState,
  Hello,
  Nack,
  NodeHealth,
  ProbeClaim,
  QuotaConsumption,
} from "@clawgate/proto";
import { BreakerPhase, STREAM_LIMITS } from "@clawgate/proto";
import type { ReportedNodeHealth } from "../fleet/fleet.js";
import type { BreakerStateName, ReportedBreaker } from "../replicas/data-plane-record.js";

/** A message within bounds, or why it is not: the field, its size and the limit, for the status. */
export type Bounded<T> = { ok: true; value: T } | { ok: false; reason: string };

/**
 * Checks a Hello before anything of it is stored or logged: every string the fleet keeps is
 * bounded, so neither memory nor GET /v1/dataplanes grows with what a client chooses to send.
 */
export function checkHello(hello: Hello): Bounded<Hello> {
  const reason =
    tooLong("Hello.nodeId", hello.nodeId, STREAM_LIMITS.nodeIdLength) ??
    tooLong("Hello.hostname", hello.hostname, STREAM_LIMITS.hostnameLength) ??
    tooLong("Hello.softwareVersion", hello.softwareVersion, STREAM_LIMITS.softwareVersionLength);
  return reason === undefined ? { ok: true, value: hello } : { ok: false, reason };
}

/**
 * Checks an Ack or Nack; a Nack's errorDetail is free text a data plane writes from whatever
 * failed, so it is cut to a bound rather than refused.
 */
export function checkAnswer<T extends Ack | Nack>(kind: "Ack" | "Nack", answer: T): Bounded<T> {
  const reason = tooLong(`${kind}.nonce`, answer.nonce, STREAM_LIMITS.nonceLength);
  if (reason !== undefined) return { ok: false, reason };
  if (!("errorDetail" in answer)) return { ok: true, value: answer };
  const errorDetail = truncate(answer.errorDetail, STREAM_LIMITS.nackDetailLength);
  return { ok: true, value: { ...answer, errorDetail } };
}

/**
 * Why a report of `entries` (a changes-only one's nodes and removed together) is over
 * STREAM_LIMITS.healthNodes, or undefined when it is not: checked before any node is decoded.
 */
export function healthCountOver(entries: number, changesOnly: boolean): string | undefined {
  if (entries <= STREAM_LIMITS.healthNodes) return undefined;
  const list = changesOnly
    ? "NodeHealthReport.nodes and .removed have"
    : "NodeHealthReport.nodes has";
  return `${list} ${entries} entries; the limit is ${STREAM_LIMITS.healthNodes}`;
}

/**
 * Checks each node's strings and cuts its evidence; `firstIndex` is the index of `nodes[0]` in
 * the report's list, for a report checked a slice at a time.
 */
export function checkNodes(
  list: "nodes" | "removed",
  nodes: readonly NodeHealth[],
  firstIndex = 0,
): Bounded<ReportedNodeHealth[]> {
  const bounded: ReportedNodeHealth[] = [];
  for (const [index, node] of nodes.entries()) {
    const field = `NodeHealthReport.${list}[${firstIndex + index}]`;
    const reason =
      tooLong(`${field}.upstream`, node.upstream, STREAM_LIMITS.healthUpstreamLength) ??
      tooLong(`${field}.address`, node.address, STREAM_LIMITS.healthAddressLength) ??
      tooLong(`${field}.state`, node.state, STREAM_LIMITS.healthStateLength);
    if (reason !== undefined) return { ok: false, reason };
    bounded.push({
      upstream: node.upstream,
      address: node.address,
      state: node.state,
      evidence: truncate(node.evidence, STREAM_LIMITS.healthEvidenceLength),
      changedAtMs: node.changedAtMs,
    });
  }
  return { ok: true, value: bounded };
}

/** Checks a QuotaUsage report: a bounded number of entries, each naming a tenant by a name. */
export function checkQuotaUsage(
  entries: readonly QuotaConsumption[],
): Bounded<readonly QuotaConsumption[]> {
  if (entries.length > STREAM_LIMITS.quotaEntries) {
    return {
      ok: false,
      reason: `QuotaUsage.entries has ${entries.length} entries; the limit is ${STREAM_LIMITS.quotaEntries}`,
    };
  }
  for (const [index, entry] of entries.entries()) {
    const reason = tooLong(
      `QuotaUsage.entries[${index}].tenant`,
      entry.tenant,
      STREAM_LIMITS.resourceNameLength,
    );
    if (reason !== undefined) return { ok: false, reason };
  }
  return { ok: true, value: entries };
}

/** Checks a ProbeClaim: it names an upstream by a name. */
export function checkProbeClaim(claim: ProbeClaim): Bounded<ProbeClaim> {
  const reason = tooLong("ProbeClaim.upstream", claim.upstream, STREAM_LIMITS.resourceNameLength);
  return reason === undefined ? { ok: true, value: claim } : { ok: false, reason };
}

const PHASES: Partial<Record<BreakerPhase, BreakerStateName>> = {
  [BreakerPhase.CLOSED]: "closed",
  [BreakerPhase.OPEN]: "open",
  [BreakerPhase.HALF_OPEN]: "half_open",
};

/**
 * Checks a BreakerReport: a bounded number of breakers, each naming an upstream by a name. A
 * phase this control plane does not know (unspecified, or from a newer data plane) is skipped.
 */
export function checkBreakerReport(breakers: readonly BreakerState[]): Bounded<ReportedBreaker[]> {
  if (breakers.length > STREAM_LIMITS.breakerStates) {
    return {
      ok: false,
      reason: `BreakerReport.breakers has ${breakers.length} entries; the limit is ${STREAM_LIMITS.breakerStates}`,
    };
  }
  const bounded: ReportedBreaker[] = [];
  for (const [index, breaker] of breakers.entries()) {
    const field = `BreakerReport.breakers[${index}].upstream`;
    const reason = tooLong(field, breaker.upstream, STREAM_LIMITS.resourceNameLength);
    if (reason !== undefined) return { ok: false, reason };
    const state = PHASES[breaker.phase];
    if (state === undefined) continue;
    bounded.push({
      upstream: breaker.upstream,
      state,
      sinceMs: Number(breaker.sinceMs),
      cooldownUntilMs: Number(breaker.cooldownUntilMs),
    });
  }
  return { ok: true, value: bounded };
}

/**
 * `text` cut to `limit` characters, saying how much was dropped; never splits a surrogate pair,
 * so the result is still valid UTF-16 for the JSON log and API.
 */
export function truncate(text: string, limit: number): string {
  if (text.length <= limit) return text;
  let end = limit;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return `${text.slice(0, end)}… [${text.length - end} more characters cut]`;
}

function tooLong(field: string, value: string, limit: number): string | undefined {
  if (value.length <= limit) return undefined;
  return `${field} is ${value.length} characters long; the limit is ${limit}`;
}
