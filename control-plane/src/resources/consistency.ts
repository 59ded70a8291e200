import { type ResourceDocuments, referenceProblems } from "@clawgate/proto";
import type { ConfigState } from "./config-state.js";

/** One broken reference: which resource, which field, and what it points at. */
export interface ConsistencyProblem {
  kind: "routes" | "upstreams";
  name: string;
  field: string;
  message: string;
}

/** What a reference check reads: some routes and upstreams, and which names exist. */
export interface ReferenceScope {
  routes: Iterable<{ name: string; document: ResourceDocuments["routes"] }>;
  upstreams: Iterable<{ name: string; document: ResourceDocuments["upstreams"] }>;
  upstreamNames: { has(name: string): boolean };
  breakerNames: { has(name: string): boolean };
}

/**
 * The shared reference check (@clawgate/proto referenceProblems) over a config state, with each
 * message naming its resource ("route api names upstream agents, which does not exist"), as
 * the admin API's 409 body and the snapshot status say it.
 */
export function consistencyProblems(state: ConfigState): ConsistencyProblem[] {
  return scopedConsistencyProblems({
    routes: state.routes.values(),
    upstreams: state.upstreams.values(),
    upstreamNames: state.upstreams,
    breakerNames: state.breakers,
  });
}

/**
 * The same check for only the routes and upstreams in `scope`: a write checks the resources it
 * touches and the users of what it deletes, not the whole config.
 */
export function scopedConsistencyProblems(scope: ReferenceScope): ConsistencyProblem[] {
  const routes = [...scope.routes].map(({ name, document }) => ({
    name,
    upstream: document.upstream,
    split: document.split,
  }));
  const upstreams = [...scope.upstreams].map(({ name, document }) => ({
    name,
    breaker: document.breaker,
  }));
  const problems = referenceProblems({
    routes,
    upstreams,
    upstreamNames: scope.upstreamNames,
    breakerNames: scope.breakerNames,
  });
  return problems.map((problem) => ({
    kind: problem.kind as ConsistencyProblem["kind"],
    name: problem.name,
    field: problem.field,
    message: `${problem.kind.slice(0, -1)} ${problem.name} ${problem.message}`,
  }));
}
