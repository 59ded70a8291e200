import { Counter, type Registry } from "prom-client";
import type { FailureKind } from "../errors/failure-kind.js";
import type { ForgetsRemoved, RemovedNames } from "./removed-names.js";
import { RouteDurationHistogram } from "./route-duration-histogram.js";

/** Label value for requests that matched no route (route names cannot start with "_"). */
export const NO_ROUTE = "_none";
/** Label value for requests that never reached an upstream. */
export const NO_UPSTREAM = "_none";

/**
 * One series of clawgate_requests_total, counted here and handed to prom-client at scrape:
 * prom-client hashes and validates a child's labels on every inc(), even a cached child's.
 */
interface RequestSeries {
  readonly labels: { route: string; upstream: string; code: string };
  pending: number;
}
type ErrorChild = ReturnType<Counter<"upstream" | "kind">["labels"]>;

/**
 * The proxy's request metrics. Label children are created once per (route, upstream, code)
 * and cached, so the hot path is a few map lookups and an increment, never a label hash.
 * Names and labels are fixed by DESIGN.md.
 */
export class ProxyMetrics implements ForgetsRemoved {
  readonly #requests: Counter<"route" | "upstream" | "code">;
  readonly #duration: RouteDurationHistogram;
  readonly #errors: Counter<"upstream" | "kind">;
  readonly #requestSeries = new Map<string, Map<string, Map<number, RequestSeries>>>();
  /** Every series, in creation order, for the flush at scrape (a Set: removal is O(1)). */
  readonly #allRequestSeries = new Set<RequestSeries>();
  /** The series by upstream, for forgetting a removed upstream's without walking every route. */
  readonly #requestSeriesByUpstream = new Map<string, Set<RequestSeries>>();
  readonly #errorChildren = new Map<string, Map<FailureKind, ErrorChild>>();

  readonly #onAnswered: ((status: number) => void) | undefined;

  /** @param onAnswered told each answered request's status (the rollout outcome counts). */
  constructor(registry: Registry, onAnswered?: (status: number) => void) {
    this.#onAnswered = onAnswered;
    this.#requests = new Counter({
      name: "clawgate_requests_total",
      help: "Requests answered by the proxy, by route, upstream and status code.",
      labelNames: ["route", "upstream", "code"],
      registers: [registry],
      // Runs before every read of the counter (a scrape, a test), so a reader sees all counts.
      collect: () => this.#flushRequests(),
    });
    this.#duration = new RouteDurationHistogram(
      "clawgate_request_duration_seconds",
      "Time from receiving a request to the end of its response, by route.",
      [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registry,
    );
    this.#errors = new Counter({
      name: "clawgate_upstream_errors_total",
      help: "Failed upstream exchanges, by upstream and what failed.",
      labelNames: ["upstream", "kind"],
      registers: [registry],
    });
  }

  /** Counts one answered request; status 499 means the client went away first. */
  request(route: string, upstream: string, status: number, durationSeconds: number): void {
    this.#onAnswered?.(status);
    let byUpstream = this.#requestSeries.get(route);
    if (byUpstream === undefined) {
      byUpstream = new Map();
      this.#requestSeries.set(route, byUpstream);
    }
    let byCode = byUpstream.get(upstream);
    if (byCode === undefined) {
      byCode = new Map();
      byUpstream.set(upstream, byCode);
    }
    let series = byCode.get(status);
    if (series === undefined) {
      series = { labels: { route, upstream, code: String(status) }, pending: 0 };
      byCode.set(status, series);
      this.#allRequestSeries.add(series);
      let ofUpstream = this.#requestSeriesByUpstream.get(upstream);
      if (ofUpstream === undefined) {
        ofUpstream = new Set();
        this.#requestSeriesByUpstream.set(upstream, ofUpstream);
      }
      ofUpstream.add(series);
    }
    series.pending++;
    this.#duration.observe(route, durationSeconds);
  }

  #flushRequests(): void {
    for (const series of this.#allRequestSeries) {
      if (series.pending === 0) continue;
      this.#requests.inc(series.labels, series.pending);
      series.pending = 0;
    }
  }

  /**
   * Drops the series of removed routes and upstreams (RemovedNames). A request in flight
   * across the swap may count its route once more afterwards: that one series is dropped
   * with the next swap that removes the name again, or stays (it is a real count).
   */
  forgetRemoved(removed: RemovedNames): void {
    for (const route of removed.routes) {
      for (const byCode of this.#requestSeries.get(route)?.values() ?? []) {
        for (const series of byCode.values()) this.#forgetRequestSeries(series);
      }
      this.#duration.forget(route);
    }
    for (const upstream of removed.upstreams) {
      for (const series of this.#requestSeriesByUpstream.get(upstream) ?? []) {
        this.#forgetRequestSeries(series);
      }
      for (const kind of this.#errorChildren.get(upstream)?.keys() ?? []) {
        this.#errors.remove({ upstream, kind });
      }
      this.#errorChildren.delete(upstream);
    }
  }

  #forgetRequestSeries(series: RequestSeries): void {
    const { route, upstream, code } = series.labels;
    this.#allRequestSeries.delete(series);
    const byUpstream = this.#requestSeries.get(route);
    const byCode = byUpstream?.get(upstream);
    byCode?.delete(Number(code));
    if (byCode?.size === 0) byUpstream?.delete(upstream);
    if (byUpstream?.size === 0) this.#requestSeries.delete(route);
    const ofUpstream = this.#requestSeriesByUpstream.get(upstream);
    ofUpstream?.delete(series);
    if (ofUpstream?.size === 0) this.#requestSeriesByUpstream.delete(upstream);
    this.#requests.remove(series.labels);
  }

  upstreamError(upstream: string, kind: FailureKind): void {
    let byKind = this.#errorChildren.get(upstream);
    if (byKind === undefined) {
      byKind = new Map();
      this.#errorChildren.set(upstream, byKind);
    }
    let counter = byKind.get(kind);
    if (counter === undefined) {
      counter = this.#errors.labels({ upstream, kind });
      byKind.set(kind, counter);
    }
    counter.inc();
  }
}
