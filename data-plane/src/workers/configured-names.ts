import type { Snapshot } from "@clawgate/proto";
import type { SeriesJson } from "./metric-family.js";

type Labels = SeriesJson["labels"];

const cache = new WeakMap<Snapshot, (labels: Labels) => boolean>();

/**
 * Whether a series' route, upstream and tenant labels still name something `snapshot`
 * configures: the test that forgets an exited worker's series of removed ones. Values starting
 * with "_" are placeholders no name can take (`_none`: no route matched, no upstream reached).
 * Built once per snapshot: at 10,000 routes the sets take a while to fill.
 */
export function configuredNames(snapshot: Snapshot): (labels: Labels) => boolean {
  let stillConfigured = cache.get(snapshot);
  if (stillConfigured !== undefined) return stillConfigured;
  const named = {
    route: new Set(snapshot.routes.map((route) => route.name)),
    upstream: new Set(snapshot.upstreams.map((upstream) => upstream.name)),
    tenant: new Set(snapshot.tenants.map((tenant) => tenant.name)),
  };
  stillConfigured = (labels) => {
    for (const [label, names] of Object.entries(named)) {
      const value = labels[label];
      if (value === undefined) continue;
      const name = String(value);
      if (!name.startsWith("_") && !names.has(name)) return false;
    }
    return true;
  };
  cache.set(snapshot, stillConfigured);
  return stillConfigured;
}
