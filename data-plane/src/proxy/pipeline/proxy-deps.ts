import type { Logger } from "pino";
import type { AccessLogSink } from "../../access-log/access-log-sink.js";
import type { ProxyMetrics } from "../../metrics/proxy-metrics.js";
import type { TenantMetrics } from "../../metrics/tenant-metrics.js";
import type { LeaseBook } from "../../quota/lease-book.js";
import type { PoolRegistry } from "../../upstream/pool-registry.js";
import type { RequestHealing } from "../request-healing.js";

/** What the stages of every request share: built once per proxy handler. */
export interface ProxyDeps {
  readonly metrics: ProxyMetrics;
  readonly logger: Logger;
  readonly pools: PoolRegistry;
  /** Breakers, cooldowns, retry budgets, pickers and the stale cache, kept across snapshots. */
  readonly healing: RequestHealing;
  /** Where each request's access-log line goes; none: the log is off. */
  readonly accessLog?: AccessLogSink;
  /** Leases on fleet-wide tenant budgets (PolicyServices.quota); none: not held. */
  readonly quota?: LeaseBook;
  /** clawgate_tenant_* counters (PolicyServices.tenantMetrics); none: not counted. */
  readonly tenantMetrics?: TenantMetrics;
  /**
   * ProxyHandlerOptions.replayBodyLimitBytes, for a body of unknown length the request-body
   * stage passes on as a stream; none: ReplayableBody's default (64 KiB).
   */
  readonly replayBodyLimitBytes?: number;
}
