import { readFile } from "node:fs/promises";
import { type AdminClient, type DataPlane, metricValue } from "../support/index.js";

/** One node as GET /v1/upstreams/{name}/health shows it. */
export interface NodeHealthView {
  address: string;
  healthy: number;
  quarantined: number;
  evicted: number;
  total: number;
  majority: string;
  reports: { dataPlane: string; state: string; evidence: string; changedAt: string }[];
  remediation?: { attempts: number; running: boolean; lastOutcome?: string };
}

/** One event of GET /v1/events. */
export interface HealEventView {
  time: string;
  upstream: string;
  node?: string;
  action: string;
  evidence?: string;
  outcome?: string;
  source: string;
}

/** The fleet's view of one node, or undefined when the upstream does not list it. */
export async function nodeHealth(
  admin: AdminClient,
  upstream: string,
  address: string,
): Promise<NodeHealthView | undefined> {
  const { body } = await admin.call<{ nodes: NodeHealthView[] }>(
    "GET",
    `/v1/upstreams/${upstream}/health`,
  );
  return body.nodes.find((node) => node.address === address);
}

/** The heal journal of one upstream, oldest first. */
export async function healEvents(admin: AdminClient, upstream: string): Promise<HealEventView[]> {
  const { body } = await admin.call<{ items: HealEventView[] }>(
    "GET",
    `/v1/events?upstream=${upstream}&limit=1000`,
  );
  return body.items.slice().reverse();
}

/** clawgate_upstream_node_healthy{upstream,node} on the data plane's /metrics. */
export async function nodeGauge(
  dp: DataPlane,
  upstream: string,
  address: string,
): Promise<number | undefined> {
  return metricValue(await dp.metrics(), "clawgate_upstream_node_healthy", {
    upstream,
    node: address,
  });
}

/** The node addresses of `upstream` in the data plane's applied snapshot (/config_dump). */
export async function snapshotNodes(dp: DataPlane, upstream: string): Promise<string[]> {
  const dump = (await dp.configDump()) as {
    snapshot: { upstreams?: { name: string; nodes?: { address: string }[] }[] };
  };
  const found = dump.snapshot.upstreams?.find((u) => u.name === upstream);
  return (found?.nodes ?? []).map((node) => node.address);
}

/** Lines of a JSON-lines file, parsed; none when it does not exist yet. */
export async function jsonLines<T>(path: string): Promise<T[]> {
  const text = await readFile(path, "utf8").catch(() => "");
  return text
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as T);
}

/** Ms from `since` (epoch ms) to the latest time a data plane reported the node in `state`. */
export function reportedAfter(view: NodeHealthView, state: string, since: number): number[] {
  return view.reports
    .filter((report) => report.state === state)
    .map((report) => Date.parse(report.changedAt) - since);
}
