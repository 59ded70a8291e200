import { referenceProblems } from "@clawgate/proto";
import type { ConfigState } from "./config-state.js";

/** One broken reference: which resource, which field, and what it points at. */
export interface ConsistencyProblem {
  kind: "routes" | "upstreams";
  name: string;
  field: string;
  message: string;
}

/**
 * The shared reference check (@clawgate/proto referenceProblems) over a config state, with each
 * message naming its resource ("route api names upstream agents, which does not exist"), as
 * the admin API's 409 body and the snapshot status say it. The admin API checks a write's
 * result with this before committing it; the snapshot builder checks each snapshot with it.
 */
export function consistencyProblems(state: ConfigState): ConsistencyProblem[] {
  const problems = referenceProblems({
    routes: [...state.routes.values()].map(({ name, document }) => ({
      name,
      upstream: document.upstream,
      split: document.split,
    })),
    upstreams: [...state.upstreams.values()].map(({ name, document }) => ({
      name,
      breaker: document.breaker,
    })),
    upstreamNames: state.upstreams,
    breakerNames: state.breakers,
  });
  return problems.map((problem) => ({
    kind: problem.kind as ConsistencyProblem["kind"],
    name: problem.name,
    field: problem.field,
    message: `${problem.kind.slice(0, -1)} ${problem.name} ${problem.message}`,
  }));
}
