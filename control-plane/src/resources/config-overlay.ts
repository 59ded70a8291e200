import type { ResourceKind } from "@clawgate/proto";
import type { StoredResource } from "./config-state.js";

/** Resources of one kind as a change set would leave them: its changes over the model's map. */
export class KindOverlay<K extends ResourceKind> {
  readonly #base: ReadonlyMap<string, StoredResource<K>>;
  /** Names the change set puts (the new resource) or deletes (undefined). */
  readonly changed = new Map<string, StoredResource<K> | undefined>();

  constructor(base: ReadonlyMap<string, StoredResource<K>>) {
    this.#base = base;
  }

  get(name: string): StoredResource<K> | undefined {
    return this.changed.has(name) ? this.changed.get(name) : this.#base.get(name);
  }

  has(name: string): boolean {
    return this.get(name) !== undefined;
  }

  set(name: string, resource: StoredResource<K>): void {
    this.changed.set(name, resource);
  }

  delete(name: string): void {
    this.changed.set(name, undefined);
  }
}

/**
 * The config after a change set, without copying the config: a write is checked against this
 * and the model it overlays, so its cost follows the change set, not the size of the config.
 */
export type ConfigOverlay = { [K in ResourceKind]: KindOverlay<K> };

export function overlayOf(
  base: { [K in ResourceKind]: ReadonlyMap<string, StoredResource<K>> },
): ConfigOverlay {
  return {
    upstreams: new KindOverlay(base.upstreams),
    routes: new KindOverlay(base.routes),
    breakers: new KindOverlay(base.breakers),
    tenants: new KindOverlay(base.tenants),
  };
}
