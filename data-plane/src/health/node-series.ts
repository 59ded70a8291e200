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

/**
 * One node's two series as counts, not text: a line is written only at scrape. Kept as finished
 * lines they were three chains of concatenated strings per node (about 500 bytes, 10 MB at
 * 20,000 nodes) that the collector walked in the seconds after boot; the names here are the
 * strings the caller already holds.
 */
interface NodeCounts {
  readonly upstream: string;
  readonly node: string;
  /** 1 in rotation, 0 out; undefined until the first `setHealthy` (no line until then). */
  healthy: 0 | 1 | undefined;
  /** Failed probes; no line while 0, as prom-client lists a counter child only once counted. */
  failures: number;
}

/**
 * The two per-node families, `clawgate_upstream_node_healthy{upstream,node}` and
 * `clawgate_probe_failures_total{upstream,node}`, in prom-client's text format. A data plane
 * holds one series of each per node (40,000 at 20,000 failing nodes); prom-client walks every
 * child and builds its label set on each scrape in one turn, blocking the event loop 90-450 ms.
 * Here a node holds its counts only, and a scrape writes the lines in chunks, one event-loop
 * turn apart.
 */
export class NodeSeries implements MetricsText {
  readonly families = [HEALTHY, FAILURES] as const;
  private readonly nodes = new Map<string, NodeCounts>();

  /** Sets the node's healthy gauge (1 or 0), creating its series if it is new. */
  setHealthy(upstream: string, node: string, healthy: boolean): void {
    this.entry(upstream, node).healthy = healthy ? 1 : 0;
  }

  /** Counts one failed probe of the node. */
  failed(upstream: string, node: string): void {
    this.entry(upstream, node).failures += 1;
  }

  /** Drops both series of a node that left the snapshot. */
  forget(upstream: string, node: string): void {
    this.nodes.delete(key(upstream, node));
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
      // A Map iterator survives changes made while it waits: a node forgotten meanwhile is
      // skipped, one added meanwhile is listed.
      let visited = 0;
      for (const node of this.nodes.values()) {
        const value = family === HEALTHY ? node.healthy : node.failures || undefined;
        if (value !== undefined) lines.push(`${family}${labels(node)} ${value}\n`);
        if (++visited % NODES_PER_TURN === 0) {
          if (lines.length > 0) yield lines.join("");
          lines = [];
          await nextTurn();
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

  private entry(upstream: string, node: string): NodeCounts {
    const k = key(upstream, node);
    let counts = this.nodes.get(k);
    if (counts === undefined) {
      counts = { upstream, node, healthy: undefined, failures: 0 };
      this.nodes.set(k, counts);
    }
    return counts;
  }
}

/** `{upstream="...",node="..."}`, escaped as prom-client does. */
function labels(counts: NodeCounts): string {
  return `{upstream="${escapeLabel(counts.upstream)}",node="${escapeLabel(counts.node)}"}`;
}

/** Upstream names cannot hold a space (config names are `[a-z0-9-]`), so it separates. */
function key(upstream: string, node: string): string {
  return `${upstream} ${node}`;
}

const NEEDS_ESCAPE = /[\\\n"]/;

/** The text format's label escapes, as prom-client writes them. */
function escapeLabel(value: string): string {
  // Node addresses and upstream names hold none of them: one test instead of three rewrites.
  if (!NEEDS_ESCAPE.test(value)) return value;
  return value.replace(/\\/g, "\\\\").replace(/\n/g, "\\n").replace(/"/g, '\\"');
}
