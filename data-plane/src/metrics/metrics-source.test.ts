import { Counter, Gauge, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { NodeSeries } from "../health/node-series.js";
import { familiesText, metricsSource } from "./metrics-source.js";

function registryOf(families: number, seriesEach: number): Registry {
  const registry = new Registry();
  for (let f = 0; f < families; f++) {
    const gauge = new Gauge({
      name: `family_${f}`,
      help: `family ${f}`,
      labelNames: ["upstream"],
      registers: [registry],
    });
    for (let s = 0; s < seriesEach; s++) gauge.set({ upstream: `u-${s}` }, s);
  }
  new Counter({ name: "plain_total", help: "no labels", registers: [registry] }).inc(3);
  return registry;
}

/** Turns other work got while `work` ran. */
async function turnsDuring(work: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let running = true;
  const tick = () => {
    turns++;
    if (running) setImmediate(tick);
  };
  setImmediate(tick);
  await work();
  running = false;
  return turns;
}

describe("metricsSource", () => {
  it("serves prom-client's text for the registry, then the node series", async () => {
    const registry = registryOf(3, 5);
    const nodes = new NodeSeries();
    nodes.setHealthy("agents", "10.0.0.1:80", true);
    const source = metricsSource(registry, nodes);
    expect(await source.metrics()).toBe(`${await registry.metrics()}\n${await nodes.text()}`);
  });

  it("renders the registry one family per event-loop turn", async () => {
    const source = metricsSource(registryOf(10, 2_000));
    // In one turn (prom-client's registry.metrics()), 20,000 series held every other task.
    expect(await turnsDuring(() => source.metrics())).toBeGreaterThanOrEqual(10);
  });

  it("renders families read at each scrape like the registry's: in order, blank-line apart, one per turn, only those named", async () => {
    const registry = registryOf(3, 2);
    let reads = 0;
    const source = metricsSource(
      new Registry(),
      familiesText(async () => {
        reads++;
        return registry;
      }),
    );
    expect(await source.metrics()).toBe(await registry.metrics());
    const picked = await source.metrics(new Set(["family_1", "plain_total"]));
    expect(picked).toBe(
      `${await registry.getSingleMetricAsString("family_1")}\n\n${await registry.getSingleMetricAsString("plain_total")}\n`,
    );
    expect(reads).toBe(2);
    const many = metricsSource(
      new Registry(),
      familiesText(async () => registryOf(10, 2_000)),
    );
    expect(await turnsDuring(() => many.metrics())).toBeGreaterThanOrEqual(10);
  });
});
