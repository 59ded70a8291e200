import { create, SnapshotSchema } from "@clawgate/proto";
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from "prom-client";
import { describe, expect, it, vi } from "vitest";
import { BreakerMetrics } from "../breaker/breaker-metrics.js";
import { familiesText, metricsSource } from "../metrics/metrics-source.js";
import type { Participants } from "./two-phase-apply.js";
import { WorkerMetrics } from "./worker-metrics.js";

/** A worker's registry with the kinds of metric a proxy worker has: a counter, a histogram, a gauge. */
function workerRegistry() {
  const registry = new Registry();
  const requests = new Counter({
    name: "clawgate_requests_total",
    help: "requests",
    labelNames: ["route", "upstream", "code"],
    registers: [registry],
  });
  const duration = new Histogram({
    name: "clawgate_request_duration_seconds",
    help: "duration",
    labelNames: ["route"],
    buckets: [0.1, 1],
    registers: [registry],
  });
  const tunnels = new Gauge({
    name: "clawgate_websocket_tunnels",
    help: "tunnels",
    labelNames: ["route"],
    registers: [registry],
  });
  return { registry, requests, duration, tunnels };
}

/**
 * Workers as the pool sees them: each id answers a scrape with its registry (through JSON, as
 * IPC carries it) unless it is `slow`; `exit` is the pool's exit handler.
 */
function fleet(options: { served?: () => ReturnType<typeof snapshotNaming> } = {}) {
  const registries = new Map<number, Registry>();
  const slow = new Set<number>();
  /** Replies held back from slow workers, to deliver late. */
  const held: (() => void)[] = [];
  const participants: Participants = {
    ids: () => [...registries.keys()],
    send: (id, message) => {
      if (message.type !== "clawgate:metrics") return;
      const registry = registries.get(id)!;
      const reply = async () => {
        const json = JSON.parse(JSON.stringify(await registry.getMetricsAsJSON())) as unknown[];
        metrics.replied(id, message.id, json);
      };
      if (slow.has(id)) held.push(() => void reply());
      else void reply();
    },
  };
  const metrics = new WorkerMetrics(participants, { replyTimeoutMs: 20, served: options.served });
  const source = metricsSource(
    new Registry(),
    familiesText(() => metrics.view()),
  );
  return {
    metrics,
    slow,
    held,
    join: (id: number, registry: Registry) => registries.set(id, registry),
    exit: (id: number) => {
      registries.delete(id);
      metrics.gone(id);
    },
    scrape: () => source.metrics(),
  };
}

/** The value of the one sample of `name` with these labels in `text` (undefined when none). */
function sample(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const found = text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`)));
  expect(found.length, `${name} ${JSON.stringify(labels)} in\n${text}`).toBeLessThanOrEqual(1);
  return found[0] === undefined ? undefined : Number(found[0].split(" ").at(-1));
}

function snapshotNaming(routes: string[], upstreams: string[]) {
  return create(SnapshotSchema, {
    version: 1n,
    routes: routes.map((name) => ({ name })),
    upstreams: upstreams.map((name) => ({ name })),
  });
}

const A = { route: "a", upstream: "u", code: "200" };

describe("WorkerMetrics", () => {
  it("keeps counters and histograms from going backwards when a worker misses a scrape, answers late, dies and is replaced", async () => {
    const workers = fleet();
    const one = workerRegistry();
    const two = workerRegistry();
    workers.join(1, one.registry);
    workers.join(2, two.registry);
    one.requests.inc(A, 5);
    two.requests.inc(A, 3);
    two.duration.observe({ route: "a" }, 0.5);
    two.tunnels.set({ route: "a" }, 4);
    one.tunnels.set({ route: "a" }, 1);
    let text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(8);
    expect(sample(text, "clawgate_websocket_tunnels", { route: "a" })).toBe(5);

    // Worker 2 is too busy to answer: its last reply stands in for it.
    workers.slow.add(2);
    two.requests.inc(A, 2);
    one.requests.inc(A, 1);
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(9);
    expect(sample(text, "clawgate_request_duration_seconds_count", { route: "a" })).toBe(1);

    // Its answer comes after the scrape gave up: it is the newest there is, and is kept.
    workers.held.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
    workers.slow.delete(2);
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(11);

    // It dies unasked after one more request, and worker 3 replaces it: its last counts stay.
    two.requests.inc(A, 1);
    workers.exit(2);
    const three = workerRegistry();
    workers.join(3, three.registry);
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(11);
    expect(sample(text, "clawgate_request_duration_seconds_count", { route: "a" })).toBe(1);
    expect(sample(text, "clawgate_request_duration_seconds_bucket", { route: "a", le: "1" })).toBe(
      1,
    );
    // Gauges are the live workers' only: its 4 tunnels closed with it.
    expect(sample(text, "clawgate_websocket_tunnels", { route: "a" })).toBe(1);

    three.requests.inc(A, 2);
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(13);
    // A second death adds to the first's counts, and a late reply from the dead is not counted.
    workers.exit(3);
    workers.metrics.replied(3, 1_000, await three.registry.getMetricsAsJSON());
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(13);
  });

  it("forgets an exited worker's series of routes and upstreams no longer configured", async () => {
    let served = snapshotNaming(["a", "b"], ["u"]);
    const workers = fleet({ served: () => served });
    const one = workerRegistry();
    workers.join(1, one.registry);
    one.requests.inc(A, 5);
    one.requests.inc({ route: "b", upstream: "u", code: "200" }, 2);
    one.requests.inc({ route: "_none", upstream: "_none", code: "404" }, 1);
    await workers.scrape();
    workers.exit(1);
    expect(sample(await workers.scrape(), "clawgate_requests_total", { route: "b" })).toBe(2);

    served = snapshotNaming(["a"], ["u"]);
    let text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", A)).toBe(5);
    expect(sample(text, "clawgate_requests_total", { route: "b" })).toBeUndefined();
    expect(sample(text, "clawgate_requests_total", { route: "_none" })).toBe(1);
    // Forgotten for good: a route of that name added again starts afresh.
    served = snapshotNaming(["a", "b"], ["u"]);
    text = await workers.scrape();
    expect(sample(text, "clawgate_requests_total", { route: "b" })).toBeUndefined();

    served = snapshotNaming(["a"], []);
    expect(sample(await workers.scrape(), "clawgate_requests_total", A)).toBeUndefined();
  });

  it.each([
    ["closed", "closed", 0],
    ["half-open", "half-open", 1],
    ["open", "half-open", 2],
    ["closed", "open", 2],
    ["half-open", "closed", 1],
  ] as const)(
    "shows breakers %s and %s in two workers as the most open, %i",
    async (first, second, shown) => {
      const workers = fleet();
      for (const [id, state] of [
        [1, first],
        [2, second],
      ] as const) {
        const registry = new Registry();
        new BreakerMetrics(registry).track("u", state);
        workers.join(id, registry);
      }
      expect(sample(await workers.scrape(), "clawgate_breaker_state", { upstream: "u" })).toBe(
        shown,
      );
    },
  );

  it("combines the workers' registries one family per event-loop turn", async () => {
    const workers = fleet();
    for (const id of [1, 2]) {
      const registry = new Registry();
      for (let f = 0; f < 10; f++) {
        const counter = new Counter({
          name: `family_${f}_total`,
          help: "f",
          labelNames: ["route"],
          registers: [registry],
        });
        for (let s = 0; s < 1_000; s++) counter.inc({ route: `r-${s}` });
      }
      workers.join(id, registry);
    }
    let turns = 0;
    let running = true;
    const tick = () => {
      turns++;
      if (running) setImmediate(tick);
    };
    setImmediate(tick);
    // The turn each aggregation ran in: one per family, each in a turn of its own.
    const original = AggregatorRegistry.aggregate.bind(AggregatorRegistry);
    const turnOf: number[] = [];
    const aggregate = vi.spyOn(AggregatorRegistry, "aggregate").mockImplementation((metrics) => {
      turnOf.push(turns);
      return original(metrics);
    });
    const text = await workers.scrape();
    running = false;
    aggregate.mockRestore();
    expect(sample(text, "family_9_total", { route: "r-999" })).toBe(2);
    expect(turnOf).toHaveLength(10);
    expect(new Set(turnOf).size).toBe(10);
  });
});
