import type { RegisteredNode } from "./registered-node.js";

export interface MergedNode {
  address: string;
  weight: number;
  source: "config" | "registry";
  /** Registry node id; absent for nodes from the upstream document. */
  id?: string;
}

export interface MergeResult {
  /** What data planes balance over: the document's nodes in order, then registered ones by id. */
  nodes: MergedNode[];
  /** Registered nodes left out because their address is already in `nodes`. */
  shadowed: RegisteredNode[];
}

/**
 * Merges an upstream's own nodes with its registered ones. On an address clash the document
 * wins (an operator's explicit weight beats a node's claim about itself), and between two
 * registrations of one address the lower node id wins, so every control plane merges alike.
 */
export function mergeNodes(
  config: readonly { address: string; weight: number }[],
  registered: readonly RegisteredNode[],
): MergeResult {
  const seen = new Set<string>();
  const nodes: MergedNode[] = [];
  for (const node of config) {
    seen.add(addressKey(node.address));
    nodes.push({ address: node.address, weight: node.weight, source: "config" });
  }
  const shadowed: RegisteredNode[] = [];
  for (const node of registered) {
    const key = addressKey(node.address);
    if (seen.has(key)) {
      shadowed.push(node);
      continue;
    }
    seen.add(key);
    nodes.push({ address: node.address, weight: node.weight, source: "registry", id: node.id });
  }
  return { nodes, shadowed };
}

// Host names are case-insensitive; "Agents:80" and "agents:80" are one node.
function addressKey(address: string): string {
  return address.toLowerCase();
}
