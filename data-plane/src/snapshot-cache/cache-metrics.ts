import { Counter, Gauge, type Registry } from "prom-client";

export type CacheErrorKind = "load-corrupt" | "load-io" | "load-rejected" | "save-io";

/** What operators need to see of the on-disk snapshot: whether it is in use, and its failures. */
export class CacheMetrics {
  readonly #fromCache: Gauge;
  readonly #errors: Counter<"kind">;
  readonly #savedVersion: Gauge;

  constructor(registry: Registry) {
    this.#fromCache = new Gauge({
      name: "clawgate_snapshot_from_cache",
      help: "1 while the serving snapshot was loaded from the disk cache and no control plane has delivered one since",
      registers: [registry],
    });
    this.#errors = new Counter({
      name: "clawgate_snapshot_cache_errors_total",
      help: "Snapshot cache failures: load-corrupt (bad file, ignored), load-io, load-rejected (did not compile), save-io",
      labelNames: ["kind"],
      registers: [registry],
    });
    this.#savedVersion = new Gauge({
      name: "clawgate_snapshot_cache_version",
      help: "Version of the snapshot last written to the disk cache; 0 before one",
      registers: [registry],
    });
    this.#fromCache.set(0);
    this.#savedVersion.set(0);
    for (const kind of ["load-corrupt", "load-io", "load-rejected", "save-io"] as const)
      this.#errors.labels(kind).inc(0);
  }

  fromCache(on: boolean): void {
    this.#fromCache.set(on ? 1 : 0);
  }

  error(kind: CacheErrorKind): void {
    this.#errors.labels(kind).inc();
  }

  saved(version: number): void {
    this.#savedVersion.set(version);
  }
}
