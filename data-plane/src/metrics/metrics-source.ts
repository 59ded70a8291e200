import type { Registry } from "prom-client";
import { onePerTurn } from "./one-per-turn.js";

/**
 * What the admin server's /metrics serves: the whole exposition, or some families of it, as
 * chunks written one event-loop turn apart (a 3 MB text at 20,000 nodes is never one string).
 */
export interface MetricsSource {
  readonly contentType: string;
  /** The text format in pieces; with `names`, only the metric families named there. */
  chunks(names?: ReadonlySet<string>): AsyncIterable<string>;
  /** The chunks joined: for tests and small registries. */
  metrics(names?: ReadonlySet<string>): Promise<string>;
}

/** Families rendered outside prom-client (the per-node series, kept as ready lines). */
export interface MetricsText {
  /** The families it renders; empty when only its text says (then it is always asked). */
  readonly families: readonly string[];
  chunks(names?: ReadonlySet<string>): AsyncIterable<string>;
}

/**
 * prom-client refreshes every `nodejs_eventloop_lag_*` gauge (and resets the delay histogram
 * behind them) when it collects this one, so a filtered scrape of any of them collects it.
 */
const LAG_COLLECTOR = "nodejs_eventloop_lag_seconds";
const LAG_FAMILY = "nodejs_eventloop_lag_";

/**
 * What rendering a family at a time needs of a registry: its family names in order, and one
 * family's text. A prom-client Registry is one; the workers' aggregation is another.
 */
export interface FamilyView {
  getMetricsAsArray(): readonly { readonly name: string }[];
  getSingleMetricAsString(name: string): Promise<string>;
}

type RegistryView = FamilyView & Pick<Registry, "contentType">;

/** A registry's series followed by each text source's, filtered by family name when asked. */
export function metricsSource(registry: RegistryView, ...texts: MetricsText[]): MetricsSource {
  async function* chunks(names?: ReadonlySet<string>): AsyncGenerator<string> {
    let written = false;
    for await (const family of registryFamilies(registry, names)) {
      yield written ? `\n${family}` : family;
      written = true;
    }
    for (const source of texts) {
      const named = source.families.length === 0 || source.families.some((f) => names?.has(f));
      if (names !== undefined && !named) continue;
      let first = true;
      for await (const chunk of source.chunks(names)) {
        if (chunk === "") continue;
        // A blank line between sources, as prom-client leaves between families.
        if (first && written) yield "\n";
        first = false;
        written = true;
        yield chunk;
      }
    }
  }
  return {
    contentType: registry.contentType,
    chunks,
    metrics: async (names) => {
      const parts: string[] = [];
      for await (const chunk of chunks(names)) parts.push(chunk);
      return parts.join("");
    },
  };
}

/**
 * The families of `registry` (those in `names`, when given) in its order and text format, one
 * per event-loop turn: at 2,000 upstreams the per-upstream breaker series alone are thousands
 * of lines, and prom-client renders a registry in one turn.
 */
async function* registryFamilies(
  registry: FamilyView,
  names: ReadonlySet<string> | undefined,
): AsyncGenerator<string> {
  const present = registry.getMetricsAsArray().map((metric) => metric.name);
  if (names !== undefined) {
    const lagAsked = present.some((n) => n.startsWith(LAG_FAMILY) && names.has(n));
    if (lagAsked && !names.has(LAG_COLLECTOR) && present.includes(LAG_COLLECTOR)) {
      await registry.getSingleMetricAsString(LAG_COLLECTOR);
    }
  }
  const asked = names === undefined ? present : present.filter((name) => names.has(name));
  for await (const name of onePerTurn(asked)) {
    yield `${await registry.getSingleMetricAsString(name)}\n`;
  }
}

/**
 * Families read afresh at each scrape (the workers' series, aggregated) as a source, rendered
 * one family per event-loop turn as the registry's are: aggregating 10,000 routes' buckets
 * from every worker in one turn would hold the primary's snapshot stream and watchdog. Its
 * families are known only once read, so it is always asked, and filters by name itself.
 */
export function familiesText(read: () => Promise<FamilyView>): MetricsText {
  return {
    families: [],
    chunks: async function* (names) {
      let first = true;
      for await (const family of registryFamilies(await read(), names)) {
        // A blank line between families, as prom-client writes them.
        yield first ? family : `\n${family}`;
        first = false;
      }
    },
  };
}
