/** One series of a family, as prom-client's getMetricsAsJSON gives it (a bucket has metricName). */
export interface SeriesJson {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly metricName?: string;
}

/**
 * One metric family of a worker's registry, as getMetricsAsJSON gives it and IPC carries it:
 * `type` is "counter", "gauge", "histogram" or "summary", `aggregator` the way prom-client's
 * AggregatorRegistry combines workers' values ("sum" unless the metric says otherwise).
 */
export interface FamilyJson {
  readonly name: string;
  readonly help: string;
  readonly type: string;
  readonly aggregator: string;
  readonly values: readonly SeriesJson[];
}

/** A worker's reply by family name. */
export function byName(families: readonly unknown[]): Map<string, FamilyJson> {
  const named = new Map<string, FamilyJson>();
  for (const family of families as FamilyJson[]) named.set(family.name, family);
  return named;
}
