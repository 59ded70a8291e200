import { DueHeap } from "./due-heap.js";
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
  /** Monotonic ms that schedules probes; default performance.now (a wall-clock step moves nothing). */
  clock?: () => number;
}

interface Entry {
  target: ProbeTarget;
  /** When its next probe is due (while in the heap). */
  dueAt: number;
  /** Its slot in the due heap; -1 while not scheduled (probing, waiting for a slot, removed). */
  heapIndex: number;
  inFlight: boolean;
  /** A probe-now arrived while a probe was running: start another as soon as it ends. */
  rerun: boolean;
  ticket: number;
  removed: boolean;
}

/**
 * Probes each target every interval, one probe per node at a time (the next is scheduled when the
 * last ends, so a slow node is never probed twice at once). Runs inside the probe worker.
 *
 * Every node's next probe sits in one heap and a single timer is armed for the earliest: an idle
 * data plane holding 20,000 nodes costs what its due probes cost, not 20,000 live timers, and a
 * tick pops only the probes that are due.
 */
export class ProbeScheduler {
  /** Every node's entry, by upstream then address. */
  private readonly upstreams = new Map<string, Map<string, Entry>>();
  private count = 0;
  private readonly due = new DueHeap<Entry>();
  private readonly clock: () => number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** When the armed timer fires, on `clock`. */
  private timerAt = Number.POSITIVE_INFINITY;
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
    this.clock = options.clock ?? (() => performance.now());
    if (!Number.isInteger(this.maxInFlight) || this.maxInFlight < 1) {
      throw new RangeError(`maxInFlight must be an integer >= 1, got ${options.maxInFlight}`);
    }
  }

  /** Replaces the target set: new nodes start, gone nodes stop, changed settings apply. */
  setTargets(targets: readonly ProbeTarget[]): void {
    const changes = new Map<string, ProbeTarget[]>();
    for (const upstream of this.upstreams.keys()) changes.set(upstream, []);
    for (const target of targets) {
      const list = changes.get(target.upstream);
      if (list === undefined) changes.set(target.upstream, [target]);
      else list.push(target);
    }
    this.setUpstreams(changes);
  }

  /**
   * Replaces the targets of the named upstreams only (an empty list: the upstream is gone);
   * every other upstream keeps its nodes and their schedule. A snapshot that changes one
   * upstream of 2,000 sends and walks that one's nodes, not all 20,000.
   */
  setUpstreams(changes: Iterable<readonly [string, readonly ProbeTarget[]]>): void {
    for (const [upstream, targets] of changes) {
      let byAddress = this.upstreams.get(upstream);
      const seen = new Set<string>();
      for (const target of targets) {
        seen.add(target.address);
        const entry = byAddress?.get(target.address);
        if (entry === undefined) {
          const added: Entry = {
            target,
            dueAt: 0,
            heapIndex: -1,
            inFlight: false,
            rerun: false,
            ticket: 0,
            removed: false,
          };
          if (byAddress === undefined) {
            byAddress = new Map();
            this.upstreams.set(upstream, byAddress);
          }
          byAddress.set(target.address, added);
          this.count += 1;
          // A new node's first probe lands at a random point of its first interval, the way
          // Prometheus spreads scrape offsets: 20,000 nodes at boot then cost 20,000 probes per
          // interval from the start. Crowding them into a tenth of it ran ten times the steady
          // rate for that whole stretch (an idle data plane at an hour's interval probed 55
          // nodes a second for six minutes). A new node is in rotation meanwhile, and a refused
          // request still quarantines it and probes it at once.
          this.schedule(added, this.random() * target.intervalMs);
          continue;
        }
        const intervalChanged = entry.target.intervalMs !== target.intervalMs;
        entry.target = target;
        if (intervalChanged && entry.heapIndex >= 0) {
          this.schedule(entry, this.jittered(target.intervalMs));
        }
      }
      if (byAddress === undefined) continue;
      for (const [address, entry] of byAddress) {
        if (seen.has(address)) continue;
        this.due.delete(entry);
        entry.removed = true;
        this.waiting.delete(entry);
        byAddress.delete(address);
        this.count -= 1;
      }
      if (byAddress.size === 0) this.upstreams.delete(upstream);
    }
    this.arm();
  }

  /** Probes the node now (or right after the probe in flight); unknown nodes are ignored. */
  probeNow(upstream: string, address: string, ticket: number): void {
    const entry = this.upstreams.get(upstream)?.get(address);
    if (entry === undefined) return;
    entry.ticket = Math.max(entry.ticket, ticket);
    if (entry.inFlight) {
      entry.rerun = true;
      return;
    }
    this.due.delete(entry);
    // Already waiting for a slot: its probe starts as soon as one frees, carrying the ticket.
    if (!this.waiting.has(entry)) this.start(entry);
  }

  stop(): void {
    for (const byAddress of this.upstreams.values()) {
      for (const entry of byAddress.values()) entry.removed = true;
    }
    this.upstreams.clear();
    this.count = 0;
    this.waiting.clear();
    this.due.clear();
    this.arm();
  }

  get size(): number {
    return this.count;
  }

  /** Probes running now; never above `maxInFlight`. */
  get inFlight(): number {
    return this.running;
  }

  /** Nodes whose probe is due but waits for a free slot. */
  get queued(): number {
    return this.waiting.size;
  }

  /** Nodes whose next probe is scheduled (not running, not waiting for a slot). */
  get scheduled(): number {
    return this.due.size;
  }

  private schedule(entry: Entry, delayMs: number): void {
    this.due.set(entry, this.clock() + delayMs);
    this.arm();
  }

  /**
   * Keeps the one timer armed for the earliest due probe. A timer already armed earlier is left
   * alone (it fires, finds nothing due yet and re-arms), so a burst of reschedules costs no
   * clearTimeout/setTimeout pair each.
   */
  private arm(): void {
    const first = this.due.peek();
    if (first === undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Number.POSITIVE_INFINITY;
      return;
    }
    if (this.timer !== undefined && this.timerAt <= first.dueAt) return;
    clearTimeout(this.timer);
    this.timerAt = first.dueAt;
    this.timer = setTimeout(() => this.fire(), Math.max(0, first.dueAt - this.clock()));
  }

  /** Starts every probe that is due; the rest stay in the heap. */
  private fire(): void {
    this.timer = undefined;
    this.timerAt = Number.POSITIVE_INFINITY;
    const now = this.clock();
    for (let entry = this.due.popDue(now); entry !== undefined; entry = this.due.popDue(now)) {
      this.start(entry);
    }
    this.arm();
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
