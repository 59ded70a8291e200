import {
  answer,
  type ScriptedUpstream,
  startScriptedUpstream,
} from "../request-healing/scripted-upstream.js";
import {
  type ApplyResource,
  type NamedUpstream,
  startNamedUpstream,
  type Teardown,
} from "../support/index.js";

/** The two upstreams the rollout tests switch between. */
export interface RolloutUpstreams {
  /** Answers 200 with its name, "good". */
  good: NamedUpstream;
  /** Answers every request 500: a version sending traffic to it must be rolled back. */
  broken: ScriptedUpstream;
}

/** Starts the good and the broken upstream, closed by `teardown`. */
export async function startRolloutUpstreams(teardown: Teardown): Promise<RolloutUpstreams> {
  const good = await startNamedUpstream("good");
  teardown.add("good upstream", () => good.close());
  const broken = await startScriptedUpstream(answer(500, "broken"));
  teardown.add("broken upstream", () => broken.close());
  return { good, broken };
}

/** The config before a rollout: route "api" (/api) to upstream "good". */
export function routeToGood({ good }: RolloutUpstreams): ApplyResource[] {
  return [
    { kind: "upstream", name: "good", spec: { nodes: [{ address: good.address }] } },
    { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "good" } },
  ];
}

/** A bad version to roll out: route "api" moved to upstream "broken". */
export function routeToBroken({ broken }: RolloutUpstreams): ApplyResource[] {
  return [
    { kind: "upstream", name: "broken", spec: { nodes: [{ address: broken.address }] } },
    { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "broken" } },
  ];
}
