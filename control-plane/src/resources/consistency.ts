import type { ConfigState } from "./config-state.js";
import { DEFAULT_BREAKER_NAME } from "./schemas.js";

/** One broken reference: which resource, which field, and what it points at. */
export interface ConsistencyProblem {
  kind: "routes" | "upstreams";
  name: string;
  field: string;
  message: string;
}

/**
 * The invariant every published snapshot keeps: every upstream a route names exists and every
 * breaker policy an upstream names exists. The admin API checks a write's result with this
 * before committing it; the snapshot builder checks each snapshot before publishing it.
 */
export function consistencyProblems(state: ConfigState): ConsistencyProblem[] {
  const problems: ConsistencyProblem[] = [];
  for (const { name, document: route } of state.routes.values()) {
    const targets = route.upstream !== undefined ? [route.upstream] : [];
    route.split?.forEach((part, index) => {
      if (!state.upstreams.has(part.upstream)) {
        problems.push({
          kind: "routes",
          name,
          field: `split.${index}.upstream`,
          message: `route ${name} names upstream ${part.upstream}, which does not exist`,
        });
      }
    });
    for (const upstream of targets) {
      if (!state.upstreams.has(upstream)) {
        problems.push({
          kind: "routes",
          name,
          field: "upstream",
          message: `route ${name} names upstream ${upstream}, which does not exist`,
        });
      }
    }
  }
  for (const { name, document: upstream } of state.upstreams.values()) {
    if (upstream.breaker !== DEFAULT_BREAKER_NAME && !state.breakers.has(upstream.breaker)) {
      problems.push({
        kind: "upstreams",
        name,
        field: "breaker",
        message: `upstream ${name} names breaker ${upstream.breaker}, which does not exist`,
      });
    }
  }
  return problems;
}
