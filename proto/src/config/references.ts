import { DEFAULT_BREAKER_NAME } from "./defaults.js";
import type { ConfigProblem } from "./problems.js";

/** What the reference check reads of a route: the upstreams it sends to. */
export interface RouteReferences {
  readonly name: string;
  readonly upstream?: string | undefined;
  readonly split?: readonly { readonly upstream: string }[] | undefined;
}

/** What the reference check reads of an upstream: the breaker policy it names ("" for none). */
export interface UpstreamReferences {
  readonly name: string;
  readonly breaker: string;
}

export interface ReferenceView {
  readonly routes: Iterable<RouteReferences>;
  readonly upstreams: Iterable<UpstreamReferences>;
  readonly upstreamNames: { has(name: string): boolean };
  readonly breakerNames: { has(name: string): boolean };
}

/**
 * The invariant every published snapshot keeps: every upstream a route names exists and every
 * breaker policy an upstream names exists ("default" is built in). The control plane checks a
 * write's result and each snapshot with this; a data plane checks each snapshot it receives.
 */
export function referenceProblems(view: ReferenceView): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const route of view.routes) {
    if (route.upstream !== undefined && route.upstream !== "") {
      if (!view.upstreamNames.has(route.upstream)) {
        problems.push(missing("routes", route.name, "upstream", "upstream", route.upstream));
      }
    }
    route.split?.forEach((part, index) => {
      if (!view.upstreamNames.has(part.upstream)) {
        const field = `split.${index}.upstream`;
        problems.push(missing("routes", route.name, field, "upstream", part.upstream));
      }
    });
  }
  for (const upstream of view.upstreams) {
    const breaker = upstream.breaker;
    if (breaker === "" || breaker === DEFAULT_BREAKER_NAME) continue;
    if (!view.breakerNames.has(breaker)) {
      problems.push(missing("upstreams", upstream.name, "breaker", "breaker", breaker));
    }
  }
  return problems;
}

function missing(
  kind: "routes" | "upstreams",
  name: string,
  field: string,
  target: string,
  targetName: string,
): ConfigProblem {
  return { kind, name, field, message: `names ${target} ${targetName}, which does not exist` };
}
