import { Counter, type Registry } from "prom-client";
import type { ForgetsRemoved, RemovedNames } from "../metrics/removed-names.js";

type RetryChild = ReturnType<Counter<"upstream" | "reason">["labels"]>;

/** clawgate_retries_total{upstream,reason}; children cached as in ProxyMetrics. */
export class RetryMetrics implements ForgetsRemoved {
  readonly #retries: Counter<"upstream" | "reason">;
  readonly #children = new Map<string, Map<string, RetryChild>>();

  constructor(registry: Registry) {
    this.#retries = new Counter({
      name: "clawgate_retries_total",
      help: "Attempts sent again to another node, by upstream and the failure that caused it.",
      labelNames: ["upstream", "reason"],
      registers: [registry],
    });
  }

  /** Drops the series of removed upstreams (RemovedNames), found through the cached children. */
  forgetRemoved(removed: RemovedNames): void {
    for (const upstream of removed.upstreams) {
      for (const reason of this.#children.get(upstream)?.keys() ?? []) {
        this.#retries.remove({ upstream, reason });
      }
      this.#children.delete(upstream);
    }
  }

  /** One retry was sent (or scheduled) because of `reason`, a failure kind. */
  retried(upstream: string, reason: string): void {
    let byReason = this.#children.get(upstream);
    if (byReason === undefined) {
      byReason = new Map();
      this.#children.set(upstream, byReason);
    }
    let child = byReason.get(reason);
    if (child === undefined) {
      child = this.#retries.labels({ upstream, reason });
      byReason.set(reason, child);
    }
    child.inc();
  }
}
