import type { SnapshotDelta } from "../gen/clawgate/v1/snapshot_service_pb.js";
import type { ConfigProblem, ResourceKind } from "./problems.js";
import { type ReferenceView, referenceProblems } from "./references.js";
import { routeProblems, uniqueNames, upstreamProblems } from "./validate-config.js";

/**
 * What a delta's references are checked against: the names each kind will have once the delta
 * is applied, and the resources whose references the delta can break. Those are the routes and
 * upstreams it carries, plus the unchanged routes that name an upstream it removes and the
 * unchanged upstreams that name a breaker it removes; the data plane finds them in its indexes,
 * so the check costs what the delta touches, not the whole config.
 */
export type DeltaReferences = ReferenceView;

/**
 * Checks a delta with the rules validateSnapshot applies to a whole snapshot, restricted to what
 * the delta touches: each resource it carries on its own, names used once, no name both changed
 * and removed, and every reference that could break. A delta that passes, applied on its base,
 * gives a snapshot validateSnapshot would pass.
 */
export function validateDelta(delta: SnapshotDelta, references: DeltaReferences): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const field of ["version", "baseVersion", "createdAtMs"] as const) {
    if (!Number.isSafeInteger(Number(delta[field]))) {
      problems.push({ kind: "snapshot", name: "", field, message: "is beyond 2^53" });
    }
  }
  const changed: [ResourceKind, readonly { name: string }[], readonly string[]][] = [
    ["breakers", delta.breakers, delta.removedBreakers],
    ["upstreams", delta.upstreams, delta.removedUpstreams],
    ["routes", delta.routes, delta.removedRoutes],
    ["tenants", delta.tenants, delta.removedTenants],
  ];
  for (const [kind, resources, removed] of changed) {
    const names = uniqueNames(kind, resources, problems);
    for (const name of removed) {
      if (names.has(name)) {
        problems.push({ kind, name, field: "", message: "is both changed and removed" });
      }
    }
  }
  for (const upstream of delta.upstreams) problems.push(...upstreamProblems(upstream));
  for (const route of delta.routes) problems.push(...routeProblems(route));
  problems.push(...referenceProblems(references));
  return problems;
}
