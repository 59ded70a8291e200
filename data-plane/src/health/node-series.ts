import { setImmediate as nextTurn } from "node:timers/promises";
import type { MetricsText } from "../metrics/metrics-source.js";

const HEALTHY = "clawgate_upstream_node_healthy";
const FAILURES = "clawgate_probe_failures_total";

const HEADER: Readonly<Record<string, string>> = {
  [HEALTHY]: `# HELP ${HEALTHY} 1 while the upstream node is in rotation, 0 while quarantined or evicted.\n# TYPE ${HEALTHY} gauge\n`,
  [FAILURES]: `# HELP ${FAILURES} Failed active health probes, by upstream and node.\n# TYPE ${FAILURES} counter\n`,
};

/**
 * Nodes rendered per event-loop turn. Each is a ready line, so a chunk is a join of 2,000
 * lines (about 150 KB, well under a millisecond); 20,000 nodes then take ten turns per family
 * instead of one long one.
 */
const NODES_PER_TURN = 2_000;

/** One node's two series, each kept as its finished exposition line. */
interface NodeLines {
  /** `{upstream="...",node="..."}`, escaped once when the node is first seen. */
  readonly labels: string;
  healthy: string;
  failures: number;
  /** Undefined until the first failed probe, as prom-client lists a counter child. */
  failuresLine: string | undefined;
}

/**
 * The two per-node families, `clawgate_upstream_node_healthy{upstream,node}` and
 * `clawgate_probe_failures_total{upstream,node}`, in prom-client's text format. A data plane
 * holds one series of each per node (40,000 at 20,000 failing nodes); prom-client re-escapes
 * every label and walks every child on each scrape, blocking the event loop 90-450 ms. Here a
 * node's line is written when its state or count changes, and a scrape hands out ready lines
 * in chunks, one event-loop turn apart.
 */
export class NodeSeries implements MetricsText {
  readonly families = [HEALTHY, FAILURES] as const;
  private readonly nodes = new Map<string, NodeLines>();

  /** Sets the node's healthy gauge (1 or 0), creating its series if it is new. */
  setHealthy(upstream: string, node: string, healthy: boolean): void {
    const lines = this.entry(upstream, node);
    lines.healthy = `${HEALTHY}${lines.labels} ${healthy ? 1 : 0}\n`;
  }

  /** Counts one failed probe of the node. */
  failed(upstream: string, node: string): void {
    const lines = this.entry(upstream, node);
    lines.failures += 1;
    lines.failuresLine = `${FAILURES}${lines.labels} ${lines.failures}\n`;
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
        const line = family === HEALTHY ? node.healthy : node.failuresLine;
        if (line !== undefined) lines.push(line);
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

  private entry(upstream: string, node: string): NodeLines {
    const k = key(upstream, node);
    let lines = this.nodes.get(k);
    if (lines === undefined) {
      const labels = `{upstream="${escapeLabel(upstream)}",node="${escapeLabel(node)}"}`;
      lines = { labels, healthy: "", failures: 0, failuresLine: undefined };
      this.nodes.set(k, lines);
    }
    return lines;
  }
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
