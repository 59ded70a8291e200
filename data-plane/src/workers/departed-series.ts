import { setImmediate as nextTurn } from "node:timers/promises";
import type { FamilyJson, SeriesJson } from "./metric-family.js";

/** Counts that only grow: a worker's last ones still belong in the sum after it exits. */
const ACCUMULATING = new Set(["counter", "histogram"]);

/**
 * The counters and histograms of workers that exited, summed per series, which the primary's
 * /metrics keeps adding to the live workers': without them a sum across workers drops when one
 * dies and Prometheus reads a counter reset (rate() and increase() spike). Gauges are left out:
 * a dead worker's tunnels or breakers are gone with it. Each family is replaced, never changed
 * in place, so a scrape rendering over several turns reads the families it started with.
 */
export class DepartedSeries {
  #families = new Map<string, FamilyJson>();
  /** Settles when every exit so far is summed in. */
  #folding: Promise<void> = Promise.resolve();

  get folding(): Promise<void> {
    return this.#folding;
  }

  /**
   * Adds an exited worker's last reply, a family per turn: at 10,000 routes its histogram alone
   * is 150,000 values.
   */
  add(reply: ReadonlyMap<string, FamilyJson>): void {
    this.#folding = this.#folding.then(async () => {
      for (const family of reply.values()) {
        if (!ACCUMULATING.has(family.type)) continue;
        await nextTurn();
        this.#families.set(family.name, summed(this.#families.get(family.name), family));
      }
    });
  }

  /** The families as they stand now (a copy: later exits do not change it). */
  families(): Map<string, FamilyJson> {
    return new Map(this.#families);
  }

  /**
   * `family` (as `families()` gave it) without the series `keep` refuses, which are forgotten:
   * a route or upstream removed from the config would otherwise hold its series forever, and a
   * data plane that replaces workers and changes config for months would grow without bound.
   */
  pruned(family: FamilyJson, keep: (labels: SeriesJson["labels"]) => boolean): FamilyJson {
    const values = family.values.filter((series) => keep(series.labels));
    if (values.length === family.values.length) return family;
    const kept = { ...family, values };
    // Unless an exit was summed into it since: then the next scrape prunes that one.
    if (this.#families.get(family.name) === family) {
      if (values.length === 0) this.#families.delete(family.name);
      else this.#families.set(family.name, kept);
    }
    return kept;
  }
}

/** `added`'s values summed into `into`'s, series by series (a new family object). */
function summed(into: FamilyJson | undefined, added: FamilyJson): FamilyJson {
  if (into === undefined) return added;
  const values = new Map<string, SeriesJson>();
  for (const series of into.values) values.set(seriesKey(series), series);
  for (const series of added.values) {
    const key = seriesKey(series);
    const before = values.get(key);
    values.set(
      key,
      before === undefined ? series : { ...before, value: before.value + series.value },
    );
  }
  return { ...into, values: [...values.values()] };
}

/** A series' identity: its name (a histogram's _bucket, _sum, _count) and its labels. */
function seriesKey(series: SeriesJson): string {
  const labels = Object.keys(series.labels)
    .sort()
    .map((name) => `${name}=${series.labels[name]}`);
  return `${series.metricName ?? ""}\u0000${labels.join("\u0000")}`;
}
