import type { Metric, Registry } from "prom-client";

/** One route's observations: a count per bucket (the last one past every bound), sum, count. */
interface RouteSeries {
  readonly route: string;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

/** A value as prom-client's registries read it (text exposition and worker aggregation). */
interface HistogramValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

/**
 * `clawgate_request_duration_seconds{route}`, observed on every request. A prom-client
 * Histogram hashes and validates its labels on every observe(), even through a cached child,
 * which was the costliest metric call per request; here an observation finds its route's series
 * in a Map and increments plain numbers, and the values are built only when a registry reads
 * them (a scrape, the workers' aggregation). Registered in a prom-client registry as a metric of
 * its own, so its exposition is a prom-client histogram's: cumulative `le` buckets with
 * `+Inf`, then `_sum` and `_count`, per route in the order the routes were first seen.
 */
export class RouteDurationHistogram {
  readonly type = "histogram";
  /** Workers' histograms add up (AggregatorRegistry). */
  readonly aggregator = "sum";
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, RouteSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    /** Upper bounds in seconds, ascending. */
    bounds: readonly number[],
    registry: Registry,
  ) {
    for (let i = 1; i < bounds.length; i++) {
      if (!(bounds[i]! > bounds[i - 1]!)) {
        throw new RangeError(`${name}: bucket bounds must ascend, got ${bounds.join(", ")}`);
      }
    }
    this.#bounds = bounds;
    // Read by the registry through name, help, type, aggregator, get() and reset() only.
    registry.registerMetric(this as unknown as Metric);
  }

  observe(route: string, seconds: number): void {
    let series = this.#series.get(route);
    if (series === undefined) {
      series = { route, buckets: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#series.set(route, series);
    }
    const bounds = this.#bounds;
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    series.buckets[i]! += 1;
    series.sum += seconds;
    series.count += 1;
  }

  /** Drops a removed route's series (ProxyMetrics.forgetRemoved). */
  forget(route: string): void {
    this.#series.delete(route);
  }

  /** What a prom-client registry renders or aggregates; built at each read. */
  async get(): Promise<{
    name: string;
    help: string;
    type: "histogram";
    aggregator: "sum";
    values: HistogramValue[];
  }> {
    const bucketName = `${this.name}_bucket`;
    const values: HistogramValue[] = [];
    for (const { route, buckets, sum, count } of this.#series.values()) {
      let cumulative = 0;
      for (let i = 0; i < this.#bounds.length; i++) {
        cumulative += buckets[i]!;
        values.push({
          value: cumulative,
          labels: { le: this.#bounds[i]!, route },
          metricName: bucketName,
        });
      }
      values.push({ value: count, labels: { le: "+Inf", route }, metricName: bucketName });
      values.push({ value: sum, labels: { route }, metricName: `${this.name}_sum` });
      values.push({ value: count, labels: { route }, metricName: `${this.name}_count` });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values,
    };
  }

  /** Registry.resetMetrics(). */
  reset(): void {
    this.#series.clear();
  }
}
