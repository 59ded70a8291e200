import type { DataPlaneView } from "../fleet/data-plane-view.js";

/**
 * A fleet of data planes that all serve the published version (SYNCED), for rollout tests:
 * canaries are picked only among such data planes.
 */
export function syncedFleet(...nodeIds: string[]): DataPlaneView[] {
  return nodeIds.map((nodeId) => ({
    nodeId,
    hostname: nodeId,
    softwareVersion: "test",
    connected: true,
    state: "SYNCED",
    appliedVersion: 1,
    publishedVersion: 1,
    lastSeen: new Date(0).toISOString(),
  }));
}
