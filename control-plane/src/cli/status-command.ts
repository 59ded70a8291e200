import { type Command, Option } from "commander";
import { stringify } from "yaml";
import type { DataPlaneView } from "../fleet/data-plane-view.js";
import type { NodeHealthSummary } from "../health/fleet-health.js";
import type { DataPlaneBreaker } from "../replicas/fleet-breakers.js";
import type { RolloutView } from "../rollout/rollout-controller.js";
import type { SnapshotStatus } from "../snapshot/snapshot-status.js";
import type { AdminClient } from "./admin-client.js";
import { ClawctlError } from "./clawctl-error.js";
import type { CommandContext, Format } from "./command-context.js";
import { listAll } from "./list-pages.js";
import { readRollout, rolloutText } from "./rollout-commands.js";
import { formatAge, renderTable } from "./table.js";

/** One node most data planes evicted (or quarantined), fleet-wide. */
interface EvictedNode {
  upstream: string;
  address: string;
  majority: string;
  evicted: number;
  quarantined: number;
  reporting: number;
}

/** One data plane's breaker of one upstream that is not closed. */
type OpenBreaker = DataPlaneBreaker & { upstream: string };

/** What `clawctl status` gathers, and prints with -o json|yaml. */
export interface FleetStatus {
  snapshot: SnapshotStatus;
  dataPlanes: (DataPlaneView & { lag: number | null })[];
  evictedNodes: EvictedNode[];
  /** Breakers open or half-open, fleet-wide, by upstream and data plane. */
  breakers: OpenBreaker[];
  /** The rollout baking now, if any. */
  rollout: RolloutView | null;
  /** Why a part could not be read (the health view is optional on a control plane). */
  notes: string[];
}

/** Upstream health views read at once; a config of thousands stays a bounded burst. */
const HEALTH_CONCURRENCY = 8;

/** `clawctl status`: one screen for an SRE, from the APIs the control plane already has. */
export function addStatusCommand(program: Command, ctx: CommandContext): void {
  program
    .command("status")
    .description(
      "show the published version, each data plane's applied version, state, lag, replica and last NACK, nodes evicted and breakers open fleet-wide",
    )
    .addOption(
      new Option("-o, --output <format>", "output format")
        .choices(["table", "json", "yaml"])
        .default("table"),
    )
    .action(async (options: { output: Format }) => {
      const status = await readStatus(await ctx.client());
      if (options.output === "json") return ctx.out(`${JSON.stringify(status, null, 2)}\n`);
      if (options.output === "yaml") return ctx.out(stringify(status));
      ctx.out(statusText(status, ctx.now()));
    });
}

export async function readStatus(api: AdminClient): Promise<FleetStatus> {
  const [snapshot, fleet, upstreams] = await Promise.all([
    api.request<SnapshotStatus>("GET", "/v1/snapshot"),
    api.request<{ items: DataPlaneView[] }>("GET", "/v1/dataplanes"),
    listAll(api, "upstreams"),
  ]);
  const notes: string[] = [];
  const evictedNodes: EvictedNode[] = [];
  const breakers: OpenBreaker[] = [];
  const names = upstreams.items.map((item) => item.name);
  for (let start = 0; start < names.length; start += HEALTH_CONCURRENCY) {
    const batch = names.slice(start, start + HEALTH_CONCURRENCY);
    const views = await Promise.all(batch.map((name) => upstreamHealth(api, name, notes)));
    for (const view of views) {
      for (const breaker of view?.breakers ?? []) breakers.push(breaker);
      for (const node of view?.nodes ?? []) {
        if (node.evicted === 0 && node.quarantined === 0) continue;
        evictedNodes.push({
          upstream: node.upstream,
          address: node.address,
          majority: node.majority,
          evicted: node.evicted,
          quarantined: node.quarantined,
          reporting: node.total,
        });
      }
    }
  }
  const dataPlanes = fleet.items.map((dp) => {
    // Against the version its own replica publishes (a replica started later numbers the same
    // config higher); a control plane older than the fleet-wide list: this one's.
    const published = dp.publishedVersion ?? snapshot.publishedVersion ?? null;
    return {
      ...dp,
      // Versions are store revisions: the lag is how many revisions behind the published one it
      // is (journal and registry writes move the revision too, so it is an upper bound on edits).
      lag: published === null ? null : Math.max(0, published - dp.appliedVersion),
    };
  });
  const rollout = await readRollout(api).catch((error: unknown) => {
    // A control plane without rollouts: the rest of the screen still helps.
    if (!(error instanceof ClawctlError)) throw error;
    notes.push(`rollout: ${error.message}`);
    return undefined;
  });
  return {
    snapshot,
    dataPlanes,
    evictedNodes,
    breakers,
    rollout: rollout?.state === "baking" ? rollout : null,
    notes,
  };
}

async function upstreamHealth(
  api: AdminClient,
  upstream: string,
  notes: string[],
): Promise<{ nodes: NodeHealthSummary[]; breakers: OpenBreaker[] } | undefined> {
  try {
    const view = await api.request<{
      nodes: Omit<NodeHealthSummary, "upstream">[];
      // Absent from a control plane older than breaker reports.
      breakers?: DataPlaneBreaker[];
    }>("GET", `/v1/upstreams/${encodeURIComponent(upstream)}/health`);
    return {
      nodes: view.nodes.map((node) => ({ ...node, upstream })),
      breakers: (view.breakers ?? []).map((breaker) => ({ upstream, ...breaker })),
    };
  } catch (error) {
    // A deleted upstream between the two reads, or a control plane without the health view.
    if (error instanceof ClawctlError) notes.push(`health of ${upstream}: ${error.message}`);
    else throw error;
    return undefined;
  }
}

function statusText(status: FleetStatus, now: number): string {
  const { snapshot } = status;
  const lines = [
    `CONFIG VERSION:     ${snapshot.version}`,
    `PUBLISHED VERSION:  ${snapshot.publishedVersion ?? "-"}${snapshot.published ? "" : " (newest version NOT published)"}`,
  ];
  if (snapshot.reason !== undefined) lines.push(`NOT PUBLISHED:      ${snapshot.reason}`);
  lines.push("", "DATA PLANES");
  const text = [`${lines.join("\n")}\n`];
  if (status.dataPlanes.length === 0) text.push("  none connected\n");
  else {
    text.push(
      renderTable(
        ["NODE ID", "STATE", "APPLIED", "LAG", "LAST SEEN", "REPLICA", "LAST NACK"],
        status.dataPlanes.map((dp) => [
          dp.nodeId,
          dp.state,
          String(dp.appliedVersion),
          dp.lag === null ? "-" : String(dp.lag),
          formatAge(dp.lastSeen, now),
          dp.replica ?? "-",
          dp.lastNack === undefined
            ? "-"
            : `version ${dp.lastNack.version}: ${dp.lastNack.error.replace(/\s+/g, " ").slice(0, 80)}`,
        ]),
      ),
    );
  }
  text.push("\nNODES EVICTED OR QUARANTINED (fleet-wide)\n");
  if (status.evictedNodes.length === 0) text.push("  none\n");
  else {
    text.push(
      renderTable(
        ["UPSTREAM", "ADDRESS", "MAJORITY", "EVICTED", "QUARANTINED", "REPORTING"],
        status.evictedNodes.map((node) => [
          node.upstream,
          node.address,
          node.majority,
          String(node.evicted),
          String(node.quarantined),
          String(node.reporting),
        ]),
      ),
    );
  }
  text.push("\nROLLOUT\n");
  if (status.rollout === null) text.push("  none in progress\n");
  else text.push(`${rolloutText(status.rollout).trimEnd().replace(/^/gm, "  ")}\n`);
  text.push("\nBREAKERS OPEN OR HALF-OPEN (fleet-wide)\n");
  if (status.breakers.length === 0) text.push("  none\n");
  else {
    text.push(
      renderTable(
        ["UPSTREAM", "DATA PLANE", "STATE", "SINCE", "COOLDOWN UNTIL"],
        status.breakers.map((breaker) => [
          breaker.upstream,
          breaker.dataPlane,
          breaker.state,
          formatAge(breaker.since, now),
          breaker.cooldownUntil ?? "-",
        ]),
      ),
    );
  }
  for (const note of status.notes) text.push(`note: ${note}\n`);
  return text.join("");
}
