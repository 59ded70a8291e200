import type { Snapshot } from "@clawgate/proto";
import { AggregatorRegistry } from "prom-client";
import type { FamilyView } from "../metrics/metrics-source.js";
import { configuredNames } from "./configured-names.js";
import { DepartedSeries } from "./departed-series.js";
import { byName, type FamilyJson } from "./metric-family.js";
import type { Participants } from "./two-phase-apply.js";

/**
 * A worker busy past this is left out of one scrape rather than stalling it: Prometheus'
 * default scrape timeout is 10 s, and the other workers' series are still worth having.
 */
const DEFAULT_REPLY_TIMEOUT_MS = 2_000;

interface Scrape {
  readonly waiting: Set<number>;
  readonly done: () => void;
}

/** A worker's latest registry, and the scrape that asked for it. */
interface Reply {
  readonly scrape: number;
  readonly families: ReadonlyMap<string, FamilyJson>;
}

/**
 * The workers' registries combined for the primary's /metrics. Only workers that hear messages
 * are asked (one still loading its code would never answer), one that dies mid-scrape is
 * counted out at once, and a hung one only up to a bounded wait: a scrape always answers.
 *
 * Counters and histograms never go backwards, which Prometheus would read as a reset: each
 * worker's last reply stands in for it when it misses a scrape, and once it exits its last
 * counts are kept and added on (DepartedSeries), less those of routes, upstreams and tenants
 * since removed. Gauges are each worker's latest, and a dead worker's drop out.
 *
 * Each family combines as its metric says (prom-client's `aggregator`: sum unless told, max
 * for clawgate_breaker_state), one family per event-loop turn.
 */
export class WorkerMetrics {
  readonly #participants: Participants;
  readonly #replyTimeoutMs: number;
  readonly #served: () => Snapshot | undefined;
  readonly #scrapes = new Map<number, Scrape>();
  /** Each worker alive and hearing messages that has answered at least once. */
  readonly #last = new Map<number, Reply>();
  readonly #departed = new DepartedSeries();
  #nextId = 1;

  constructor(
    participants: Participants,
    options: {
      replyTimeoutMs?: number;
      /** The snapshot served now: an exited worker's series of what it no longer names go. */
      served?: () => Snapshot | undefined;
    } = {},
  ) {
    this.#participants = participants;
    this.#replyTimeoutMs = options.replyTimeoutMs ?? DEFAULT_REPLY_TIMEOUT_MS;
    this.#served = options.served ?? (() => undefined);
  }

  /** Asks every worker for its registry, and returns the combined families to render. */
  async view(): Promise<FamilyView> {
    await this.#ask();
    // What every exit so far left, and every live worker's last reply, taken in one turn: a
    // worker whose exit is still being summed in would otherwise be in neither, or in both.
    let lasts: ReadonlyMap<string, FamilyJson>[];
    let departed: Map<string, FamilyJson>;
    for (;;) {
      const folding = this.#departed.folding;
      await folding;
      if (folding !== this.#departed.folding) continue;
      lasts = [...this.#last.values()].map((reply) => reply.families);
      departed = this.#departed.families();
      break;
    }
    const served = this.#served();
    const keep = served === undefined ? () => true : configuredNames(served);
    const names = new Set<string>();
    for (const families of [...lasts, departed])
      for (const name of families.keys()) names.add(name);
    return {
      getMetricsAsArray: () => [...names].map((name) => ({ name })),
      getSingleMetricAsString: (name) => {
        const parts: FamilyJson[] = [];
        for (const families of lasts) {
          const family = families.get(name);
          if (family !== undefined) parts.push(family);
        }
        const exited = departed.get(name);
        if (exited !== undefined) parts.push(this.#departed.pruned(exited, keep));
        return AggregatorRegistry.aggregate(parts.map((part) => [part])).getSingleMetricAsString(
          name,
        );
      },
    };
  }

  /** A worker's registry, as getMetricsAsJSON gives it, answering scrape `id`. */
  replied(workerId: number, id: number, metrics: unknown[]): void {
    // Kept even past its scrape's wait (a late answer is the newest there is), unless the
    // worker was counted out as dead meanwhile: its last counts are already kept.
    const before = this.#last.get(workerId);
    const hearing = before !== undefined || this.#participants.ids().includes(workerId);
    if (hearing && (before === undefined || before.scrape < id)) {
      this.#last.set(workerId, { scrape: id, families: byName(metrics) });
    }
    const scrape = this.#scrapes.get(id);
    if (scrape === undefined || !scrape.waiting.delete(workerId)) return;
    if (scrape.waiting.size === 0) scrape.done();
  }

  /** A worker died (or was killed as hung): no scrape waits for it, and its counts are kept. */
  gone(workerId: number): void {
    for (const scrape of this.#scrapes.values()) {
      if (scrape.waiting.delete(workerId) && scrape.waiting.size === 0) scrape.done();
    }
    const last = this.#last.get(workerId);
    if (last === undefined) return;
    this.#last.delete(workerId);
    this.#departed.add(last.families);
  }

  /** Asks each worker for its registry; settles when all answered or the wait is over. */
  #ask(): Promise<void> {
    const workers = this.#participants.ids();
    const id = this.#nextId++;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(() => scrape.done(), this.#replyTimeoutMs);
      const scrape: Scrape = {
        waiting: new Set(workers),
        done: () => {
          clearTimeout(timer);
          this.#scrapes.delete(id);
          resolve();
        },
      };
      this.#scrapes.set(id, scrape);
      if (workers.length === 0) return scrape.done();
      for (const worker of workers)
        this.#participants.send(worker, { type: "clawgate:metrics", id });
    });
  }
}
