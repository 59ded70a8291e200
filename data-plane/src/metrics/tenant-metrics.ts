import { Counter, type Registry } from "prom-client";
import type { ForgetsRemoved, RemovedNames } from "./removed-names.js";

type RequestChild = ReturnType<Counter<"tenant" | "code">["labels"]>;
type TokenChild = ReturnType<Counter<"tenant">["labels"]>;

/**
 * Usage per tenant: clawgate_tenant_requests_total{tenant,code} and
 * clawgate_tenant_tokens_total{tenant} (names fixed by DESIGN.md). Children are cached per
 * tenant and code, so counting is a map lookup and an increment; tenants are a configured,
 * bounded set, so the label stays low-cardinality.
 */
export class TenantMetrics implements ForgetsRemoved {
  readonly #requests: Counter<"tenant" | "code">;
  readonly #tokens: Counter<"tenant">;
  readonly #requestChildren = new Map<string, Map<number, RequestChild>>();
  readonly #tokenChildren = new Map<string, TokenChild>();

  constructor(registry: Registry) {
    this.#requests = new Counter({
      name: "clawgate_tenant_requests_total",
      help: "Requests answered for each tenant, by status code.",
      labelNames: ["tenant", "code"],
      registers: [registry],
    });
    this.#tokens = new Counter({
      name: "clawgate_tenant_tokens_total",
      help: "Model tokens each tenant's responses reported in their usage.",
      labelNames: ["tenant"],
      registers: [registry],
    });
  }

  request(tenant: string, status: number): void {
    let byCode = this.#requestChildren.get(tenant);
    if (byCode === undefined) {
      byCode = new Map();
      this.#requestChildren.set(tenant, byCode);
    }
    let child = byCode.get(status);
    if (child === undefined) {
      child = this.#requests.labels(tenant, String(status));
      byCode.set(status, child);
    }
    child.inc();
  }

  /** Drops the series of removed tenants (RemovedNames), found through the cached children. */
  forgetRemoved(removed: RemovedNames): void {
    for (const tenant of removed.tenants) {
      for (const code of this.#requestChildren.get(tenant)?.keys() ?? []) {
        this.#requests.remove(tenant, String(code));
      }
      this.#requestChildren.delete(tenant);
      if (this.#tokenChildren.delete(tenant)) this.#tokens.remove(tenant);
    }
  }

  tokens(tenant: string, tokens: number): void {
    if (tokens <= 0) return;
    let child = this.#tokenChildren.get(tenant);
    if (child === undefined) {
      child = this.#tokens.labels(tenant);
      this.#tokenChildren.set(tenant, child);
    }
    child.inc(tokens);
  }
}
