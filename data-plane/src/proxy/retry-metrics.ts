import { Counter, type Registry } from "prom-client";

type RetryChild = ReturnType<Counter<"upstream" | "reason">["labels"]>;

/** clawgate_retries_total{upstream,reason}; children cached as in ProxyMetrics. */
export class RetryMetrics {
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
