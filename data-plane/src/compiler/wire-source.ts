import type {
  BreakerPolicy,
  Route,
  Snapshot,
  SnapshotDelta,
  Tenant,
  Upstream,
} from "@clawgate/proto";
import { LayeredMap } from "./layered-map.js";

/** The resources of a wire snapshot by name, in the snapshot's order. */
export interface WireResources {
  readonly routes: Map<string, Route>;
  readonly upstreams: Map<string, Upstream>;
  readonly breakers: Map<string, BreakerPolicy>;
  readonly tenants: Map<string, Tenant>;
}

/**
 * The wire snapshot a compiled snapshot was made from, kept by name so the next delta derives
 * its own in proportion to what it changed (LayeredMap). Rebuilding the arrays of 10,000
 * routes per one-route delta, and freezing them, was the largest share of a delta's CPU,
 * though only /config_dump, the disk cache's compaction and a TLS file reload read the whole
 * snapshot: it is put together when first asked for (`snapshot()`), once per version.
 */
export class WireSource {
  readonly routes: LayeredMap<string, Route>;
  readonly upstreams: LayeredMap<string, Upstream>;
  readonly breakers: LayeredMap<string, BreakerPolicy>;
  readonly tenants: LayeredMap<string, Tenant>;
  /** The scalar fields (version, nonce, createdAtMs); its resource lists are not read. */
  readonly #head: Snapshot;
  #whole: Snapshot | undefined;

  private constructor(
    head: Snapshot,
    resources: Pick<WireSource, "routes" | "upstreams" | "breakers" | "tenants">,
    whole: Snapshot | undefined,
  ) {
    this.#head = head;
    this.#whole = whole;
    this.routes = resources.routes;
    this.upstreams = resources.upstreams;
    this.breakers = resources.breakers;
    this.tenants = resources.tenants;
  }

  /**
   * A whole snapshot, frozen by the caller, with its resources by name; the maps are taken
   * over (never written again).
   */
  static whole(snapshot: Snapshot, resources: WireResources): WireSource {
    // The head keeps no resource list alive once the maps have moved on from it.
    const head = { ...snapshot, routes: [], upstreams: [], breakers: [], tenants: [] };
    return new WireSource(
      head,
      {
        routes: LayeredMap.over(resources.routes),
        upstreams: LayeredMap.over(resources.upstreams),
        breakers: LayeredMap.over(resources.breakers),
        tenants: LayeredMap.over(resources.tenants),
      },
      snapshot,
    );
  }

  /**
   * The source of the delta's version: resources replaced in place, new ones after the rest,
   * removed ones gone, as the control plane would send it whole. This one is unchanged.
   */
  next(delta: SnapshotDelta): WireSource {
    const pairs = <T extends { name: string }>(list: readonly T[]) =>
      list.map((resource) => [resource.name, resource] as const);
    return new WireSource(
      {
        ...this.#head,
        version: delta.version,
        nonce: delta.nonce,
        createdAtMs: delta.createdAtMs,
        part: 0,
        parts: 0,
      },
      {
        routes: changed(this.routes, pairs(delta.routes), delta.removedRoutes),
        upstreams: changed(this.upstreams, pairs(delta.upstreams), delta.removedUpstreams),
        breakers: changed(this.breakers, pairs(delta.breakers), delta.removedBreakers),
        tenants: changed(this.tenants, pairs(delta.tenants), delta.removedTenants),
      },
      undefined,
    );
  }

  /** The whole wire snapshot, frozen; put together on the first call (O(config)), then kept. */
  snapshot(): Snapshot {
    this.#whole ??= Object.freeze({
      ...this.#head,
      routes: Object.freeze([...this.routes.values()]),
      upstreams: Object.freeze([...this.upstreams.values()]),
      breakers: Object.freeze([...this.breakers.values()]),
      tenants: Object.freeze([...this.tenants.values()]),
    }) as Snapshot;
    return this.#whole;
  }
}

function changed<T>(
  map: LayeredMap<string, T>,
  set: readonly (readonly [string, T])[],
  removed: readonly string[],
): LayeredMap<string, T> {
  return set.length === 0 && removed.length === 0 ? map : map.with(set, removed);
}
