import { setImmediate as nextTurn } from "node:timers/promises";
import type { MetricsText } from "../metrics/metrics-source.js";

const HEALTHY = "clawgate_upstream_node_healthy";
const FAILURES = "clawgate_probe_failures_total";

const HEADER: Readonly<Record<string, string>> = {
  [HEALTHY]: `# HELP ${HEALTHY} 1 while the upstream node is in rotation, 0 while quarantined or evicted.\n# TYPE ${HEALTHY} gauge\n`,
  [FAILURES]: `# HELP ${FAILURES} Failed active health probes, by upstream and node.\n# TYPE ${FAILURES} counter\n`,
};

/**
 * Nodes rendered per event-loop turn. A chunk is 2,000 lines written and joined (about 150 KB,
 * a millisecond or two); 20,000 nodes then take ten turns per family instead of one long one.
 */
const NODES_PER_TURN = 2_000;

/** `healthy` of a slot with no line yet (no `setHealthy` since it was made). */
const UNSET = -1;
/** Slots the arrays start with; they double as nodes come. */
const FIRST_SLOTS = 1_024;

/**
 * The two per-node families, `clawgate_upstream_node_healthy{upstream,node}` and
 * `clawgate_probe_failures_total{upstream,node}`, in prom-client's text format. A data plane
 * holds one series of each per node (40,000 at 20,000 failing nodes); prom-client walks every
 * child and builds its label set on each scrape in one turn, blocking the event loop 90-450 ms.
 * Here a node holds its counts only, and a scrape writes the lines in chunks, one event-loop
 * turn apart.
 *
 * A node's counts are a slot in two typed arrays, found through a map per upstream keyed by the
 * address string the snapshot already holds. As an object per node (and a joined
 * "upstream node" key), each node was about 100 bytes of small objects made in the turns after
 * a first snapshot's swap, long-lived state that a loaded machine can still hold young when
 * the next scavenge comes, in the middle of a later one-route change (issue 9's block).
 * A typed array's contents are not copied by a scavenge, and a Smi slot is no object at all.
 */
export class NodeSeries implements MetricsText {
  readonly families = [HEALTHY, FAILURES] as const;
  /** upstream -> node address -> slot. */
  private readonly slots = new Map<string, Map<string, number>>();
  /** Per slot: 1 in rotation, 0 out, UNSET until the first `setHealthy` (no line until then). */
  private healthy = new Int8Array(FIRST_SLOTS);
  /** Per slot: failed probes; no line while 0, as prom-client lists a counter child only once counted. */
  private failures = new Float64Array(FIRST_SLOTS);
  /** Slots of forgotten nodes, reused before the arrays grow. */
  private readonly free: number[] = [];
  private used = 0;

  /** Sets the node's healthy gauge (1 or 0), creating its series if it is new. */
  setHealthy(upstream: string, node: string, healthy: boolean): void {
    // The slot first: making it may replace the arrays with larger ones.
    const slot = this.slot(upstream, node);
    this.healthy[slot] = healthy ? 1 : 0;
  }

  /** Counts one failed probe of the node. */
  failed(upstream: string, node: string): void {
    const slot = this.slot(upstream, node);
    this.failures[slot]! += 1;
  }

  /** Drops both series of a node that left the snapshot. */
  forget(upstream: string, node: string): void {
    const nodes = this.slots.get(upstream);
    const slot = nodes?.get(node);
    if (nodes === undefined || slot === undefined) return;
    nodes.delete(node);
    if (nodes.size === 0) this.slots.delete(upstream);
    this.free.push(slot);
  }

  /**
   * The families asked for (both when `names` is undefined), in chunks of `NODES_PER_TURN`
   * nodes, each after an event-loop turn: neither the render nor the join of one 3 MB string
   * holds the loop.
   */
  async *chunks(names?: ReadonlySet<string>): AsyncGenerator<string> {
    for (const family of this.families) {
      if (names !== undefined && !names.has(family)) continue;
      let lines: string[] = [HEADER[family]!];
      // Map iterators survive changes made while they wait: a node forgotten meanwhile is
      // skipped, one added meanwhile is listed. The arrays are read through `this`, as they
      // may have grown meanwhile.
      let visited = 0;
      for (const [upstream, nodes] of this.slots) {
        for (const [node, slot] of nodes) {
          const value =
            family === HEALTHY
              ? this.healthy[slot]! === UNSET
                ? undefined
                : this.healthy[slot]
              : this.failures[slot] || undefined;
          if (value !== undefined) lines.push(`${family}${labels(upstream, node)} ${value}\n`);
          if (++visited % NODES_PER_TURN === 0) {
            if (lines.length > 0) yield lines.join("");
            lines = [];
            await nextTurn();
          }
        }
      }
      if (lines.length > 0) yield lines.join("");
    }
  }

  /** All of `chunks(names)` in one string: for tests. */
  async text(names?: ReadonlySet<string>): Promise<string> {
    const parts: string[] = [];
    for await (const chunk of this.chunks(names)) parts.push(chunk);
    return parts.join("");
  }

  /** The node's slot, made (no line in either family yet) when it is new. */
  private slot(upstream: string, node: string): number {
    let nodes = this.slots.get(upstream);
    if (nodes === undefined) {
      nodes = new Map();
      this.slots.set(upstream, nodes);
    }
    let slot = nodes.get(node);
    if (slot === undefined) {
      slot = this.free.pop() ?? this.nextSlot();
      this.healthy[slot] = UNSET;
      this.failures[slot] = 0;
      nodes.set(node, slot);
    }
    return slot;
  }

  private nextSlot(): number {
    if (this.used === this.healthy.length) {
      const healthy = new Int8Array(this.used * 2);
      healthy.set(this.healthy);
      this.healthy = healthy;
      const failures = new Float64Array(this.used * 2);
      failures.set(this.failures);
      this.failures = failures;
    }
    return this.used++;
  }
}

/** `{upstream="...",node="..."}`, escaped as prom-client does. */
function labels(upstream: string, node: string): string {
  return `{upstream="${escapeLabel(upstream)}",node="${escapeLabel(node)}"}`;
}

const NEEDS_ESCAPE = /[\\\n"]/;

/** The text format's label escapes, as prom-client writes them. */
function escapeLabel(value: string): string {
  // Node addresses and upstream names hold none of them: one test instead of three rewrites.
  if (!NEEDS_ESCAPE.test(value)) return value;
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}
