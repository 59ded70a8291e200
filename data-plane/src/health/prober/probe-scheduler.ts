import type { ProbeOutcome } from "./probe.js";
import type { ProbeResult, ProbeSpec, ProbeTarget } from "./probe-protocol.js";

/** Share of the interval added or removed at random, so probes of many nodes do not march in step. */
export const PROBE_JITTER = 0.1;

/**
 * Probes in flight at once, across every node. A rack gone dark (packets dropped, not refused)
 * leaves each probe open until its timeout; without a bound, 6,000 such nodes mean 6,000 sockets
 * and timers at once. Due probes past the bound wait their turn in order, so intervals stretch
 * under such a burst instead of memory growing.
 */
export const MAX_PROBES_IN_FLIGHT = 256;

export interface ProbeSchedulerOptions {
  /** Runs one probe; `probeNode` in the worker, a fake in tests. Must not throw. */
  probe: (spec: ProbeSpec) => Promise<ProbeOutcome>;
  /** Receives every finished probe. */
  emit: (result: ProbeResult) => void;
  /** Uniform random in [0, 1); default Math.random. */
  random?: () => number;
  /** Wall clock for `ProbeResult.at`; default Date.now. */
  now?: () => number;
  /** Probes running at once at most; default `MAX_PROBES_IN_FLIGHT`. */
  maxInFlight?: number;
}

interface Entry {
  target: ProbeTarget;
  timer: ReturnType<typeof setTimeout> | undefined;
  inFlight: boolean;
  /** A probe-now arrived while a probe was running: start another as soon as it ends. */
  rerun: boolean;
  ticket: number;
  removed: boolean;
}

/**
 * Probes each target every interval, one probe per node at a time (the next is scheduled when the
 * last ends, so a slow node is never probed twice at once). Runs inside the probe worker.
 */
export class ProbeScheduler {
  private readonly entries = new Map<string, Entry>();
  /** Due entries waiting for a free slot, oldest first (a Set: O(1) removal, insertion order). */
  private readonly waiting = new Set<Entry>();
  private readonly random: () => number;
  private readonly now: () => number;
  private readonly maxInFlight: number;
  private running = 0;

  constructor(private readonly options: ProbeSchedulerOptions) {
    this.random = options.random ?? Math.random;
    this.now = options.now ?? Date.now;
    this.maxInFlight = options.maxInFlight ?? MAX_PROBES_IN_FLIGHT;
    if (!Number.isInteger(this.maxInFlight) || this.maxInFlight < 1) {
      throw new RangeError(`maxInFlight must be an integer >= 1, got ${options.maxInFlight}`);
    }
  }

  /** Replaces the target set: new nodes start, gone nodes stop, changed settings apply. */
  setTargets(targets: readonly ProbeTarget[]): void {
    const seen = new Set<string>();
    for (const target of targets) {
      const key = keyOf(target.upstream, target.address);
      seen.add(key);
      const entry = this.entries.get(key);
      if (entry === undefined) {
        const added: Entry = {
          target,
          timer: undefined,
          inFlight: false,
          rerun: false,
          ticket: 0,
          removed: false,
        };
        this.entries.set(key, added);
        // A new node is probed soon (within the first tenth of its interval), not a full
        // interval later, yet a snapshot with many nodes does not fire them all at once.
        this.schedule(added, this.random() * target.intervalMs * PROBE_JITTER);
        continue;
      }
      const intervalChanged = entry.target.intervalMs !== target.intervalMs;
      entry.target = target;
      if (intervalChanged && entry.timer !== undefined) {
        this.schedule(entry, this.jittered(target.intervalMs));
      }
    }
    for (const [key, entry] of this.entries) {
      if (seen.has(key)) continue;
      clearTimeout(entry.timer);
      entry.removed = true;
      this.waiting.delete(entry);
      this.entries.delete(key);
    }
  }

  /** Probes the node now (or right after the probe in flight); unknown nodes are ignored. */
  probeNow(upstream: string, address: string, ticket: number): void {
    const entry = this.entries.get(keyOf(upstream, address));
    if (entry === undefined) return;
    entry.ticket = Math.max(entry.ticket, ticket);
    if (entry.inFlight) {
      entry.rerun = true;
      return;
    }
    clearTimeout(entry.timer);
    entry.timer = undefined;
    // Already waiting for a slot: its probe starts as soon as one frees, carrying the ticket.
    if (!this.waiting.has(entry)) this.start(entry);
  }

  stop(): void {
    for (const entry of this.entries.values()) {
      clearTimeout(entry.timer);
      entry.removed = true;
    }
    this.entries.clear();
    this.waiting.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  /** Probes running now; never above `maxInFlight`. */
  get inFlight(): number {
    return this.running;
  }

  /** Nodes whose probe is due but waits for a free slot. */
  get queued(): number {
    return this.waiting.size;
  }

  private schedule(entry: Entry, delayMs: number): void {
    clearTimeout(entry.timer);
    entry.timer = setTimeout(() => {
      entry.timer = undefined;
      this.start(entry);
    }, delayMs);
  }

  /** Runs the entry's probe now if a slot is free, else queues it for the next free slot. */
  private start(entry: Entry): void {
    if (this.running >= this.maxInFlight) {
      this.waiting.add(entry);
      return;
    }
    this.running += 1;
    void this.run(entry);
  }

  /** A probe ended: hand its slot to the oldest waiting entry. */
  private release(): void {
    this.running -= 1;
    const next = this.waiting.values().next();
    if (next.done) return;
    this.waiting.delete(next.value);
    this.start(next.value);
  }

  private async run(entry: Entry): Promise<void> {
    entry.inFlight = true;
    entry.rerun = false;
    const { target } = entry;
    const ticket = entry.ticket;
    let outcome: ProbeOutcome;
    try {
      outcome = await this.options.probe(target);
    } catch (err) {
      // probeNode never throws; this keeps a bug in it from silently ending a node's probes.
      outcome = { ok: false, evidence: { error: String(err) }, durationMs: 0 };
    }
    entry.inFlight = false;
    if (entry.removed) {
      this.release();
      return;
    }
    this.options.emit({
      type: "result",
      upstream: target.upstream,
      address: target.address,
      ok: outcome.ok,
      evidence: outcome.evidence,
      durationMs: outcome.durationMs,
      at: this.now(),
      ticket,
    });
    if (entry.rerun) this.waiting.add(entry);
    else this.schedule(entry, this.jittered(entry.target.intervalMs));
    this.release();
  }

  private jittered(intervalMs: number): number {
    return intervalMs * (1 - PROBE_JITTER + 2 * PROBE_JITTER * this.random());
  }
}

// Upstream names cannot hold a space (DESIGN.md resource names), so the key is unambiguous.
function keyOf(upstream: string, address: string): string {
  return `${upstream} ${address}`;
}
