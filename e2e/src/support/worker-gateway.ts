import { startEtcd } from "@clawgate/control-plane/testing";
import { type ControlPlane, startControlPlane } from "./control-plane-process.js";
import type { DataPlane } from "./data-plane-process.js";
import { type NamedUpstream, startNamedUpstream } from "./named-upstream.js";
import type { Teardown } from "./teardown.js";
import { startWorkerDataPlane } from "./worker-data-plane.js";

export interface WorkerGatewayOptions {
  /** Named upstreams to start, each configured as an upstream of the same name; default ["a"]. */
  upstreams?: string[];
  /** The upstream route "api" (path prefix /api) sends to; default the first of `upstreams`. */
  routeTo?: string;
  /** The data plane's environment on top of the control plane's address and two workers. */
  dataPlaneEnv?: Record<string, string>;
  /** Where the control plane keeps its config: its own etcd (default) or the embedded store. */
  store?: "etcd" | "embedded";
}

export interface WorkerGateway {
  cp: ControlPlane;
  /** A data plane with two workers, SYNCED on the route and both workers listening. */
  dp: DataPlane;
  /** The named upstreams by name. */
  upstreams: Record<string, NamedUpstream>;
}

/**
 * The setup the worker tests share: a control plane, named upstreams, route "api" to one of
 * them, and a data plane with workers: 2 serving it. Everything started is stopped by
 * `teardown`, last first.
 */
export async function startWorkerGateway(
  teardown: Teardown,
  options: WorkerGatewayOptions = {},
): Promise<WorkerGateway> {
  const names = options.upstreams ?? ["a"];
  const controlPlaneEnv: Record<string, string> = {};
  if ((options.store ?? "etcd") === "etcd") {
    const etcd = await startEtcd();
    teardown.add("etcd", () => etcd.stop());
    controlPlaneEnv.CLAWGATE_ETCD_ENDPOINTS = etcd.endpoint;
  }
  const upstreams: Record<string, NamedUpstream> = {};
  for (const name of names) {
    const upstream = await startNamedUpstream(name);
    teardown.add(`upstream ${name}`, () => upstream.close());
    upstreams[name] = upstream;
  }
  const cp = await startControlPlane(controlPlaneEnv);
  teardown.add("control plane", () => cp.stop());
  for (const upstream of Object.values(upstreams)) {
    await cp.admin.putUpstream(upstream.name, {
      nodes: [{ address: upstream.address, weight: 1 }],
    });
  }
  const routeTo = options.routeTo ?? names[0]!;
  await cp.admin.putRoute("api", { match: { pathPrefix: "/api" }, upstream: routeTo });
  const dp = await startWorkerDataPlane(teardown, cp, { env: options.dataPlaneEnv });
  return { cp, dp, upstreams };
}
