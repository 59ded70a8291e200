import { type EtcdProcess, startEtcd } from "@clawgate/control-plane/testing";
import { type NodeProcess, spawnNode } from "../connection-healing/node-process.js";
import {
  type ApplyResource,
  type ControlPlane,
  type DataPlane,
  startControlPlane,
  startDataPlane,
  Teardown,
  waitForConvergence,
} from "../support/index.js";

/** Fast probes, so a killed node is evicted within a second or two (the defaults are 10 s / 3 s). */
export const PROBE = {
  intervalMs: 200,
  // Generous: on a loaded 2-core machine a healthy node's answer can take longer than an
  // interval; a killed node is refused at once, so eviction is no slower for it.
  timeoutMs: 1_000,
  unhealthyThreshold: 2,
  healthyThreshold: 2,
  path: "/healthz",
  expectStatus: "ok",
};

/** The instanceId of the cluster's control plane: the replica its data planes stream from. */
export const CONSOLE_REPLICA = "cp-console";

/** What the console shows: one control plane on etcd, two data planes, one upstream of two nodes. */
export interface ConsoleCluster {
  etcd: EtcdProcess;
  cp: ControlPlane;
  dataPlanes: DataPlane[];
  nodes: NodeProcess[];
  /** The version both data planes applied. */
  version: number;
}

/**
 * Starts the cluster, registering each process on `teardown` (which stops them, by PID, in
 * reverse). `extra` resources are applied with the upstream "api" and its route.
 */
export async function startConsoleCluster(
  teardown: Teardown,
  extra: ApplyResource[] = [],
): Promise<ConsoleCluster> {
  const etcd = await startEtcd();
  teardown.add("etcd", () => etcd.stop());
  const nodes = await Promise.all(["a", "b"].map((name) => spawnNode(name)));
  for (const node of nodes) teardown.add(`node ${node.name}`, () => node.process.stop());
  const cp = await startControlPlane({
    CLAWGATE_ETCD_ENDPOINTS: etcd.endpoint,
    CLAWGATE_INSTANCE_ID: CONSOLE_REPLICA,
  });
  teardown.add("control plane", () => cp.stop());
  const write = await cp.admin.apply([
    {
      kind: "upstream",
      name: "api",
      spec: { nodes: nodes.map((n) => ({ address: n.address })), healthCheck: PROBE },
    },
    { kind: "route", name: "api", spec: { match: { pathPrefix: "/api" }, upstream: "api" } },
    ...extra,
  ]);
  const dataPlanes = await Promise.all([
    startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress }),
    startDataPlane({ CLAWGATE_CP_ADDRESSES: cp.grpcAddress }),
  ]);
  for (const dp of dataPlanes) teardown.add(`data plane ${dp.nodeId}`, () => dp.stop());
  const version = await waitForConvergence(cp, dataPlanes, { atLeast: write.revision ?? 1 });
  return { etcd, cp, dataPlanes, nodes, version };
}

export { Teardown };
