/**
 * The routes, upstreams and tenants a snapshot swap took out of the config: the label values
 * whose series the request-path metrics drop, or a config that renames 10,000 routes a few
 * times would leave every old name's series in the registry, and in every scrape, for good.
 */
export interface RemovedNames {
  readonly routes: ReadonlySet<string>;
  readonly upstreams: ReadonlySet<string>;
  readonly tenants: ReadonlySet<string>;
}

/** Metrics labelled by route, upstream or tenant: each drops the series of removed ones. */
export interface ForgetsRemoved {
  /** Work in proportion to the names removed and their series, never to the whole registry. */
  forgetRemoved(removed: RemovedNames): void;
}

export const NOTHING_REMOVED: RemovedNames = {
  routes: new Set(),
  upstreams: new Set(),
  tenants: new Set(),
};
