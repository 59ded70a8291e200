import { nodeSchema } from "@clawgate/proto";
import { z } from "zod";
import { describeIssue } from "../resources/config-state.js";
import type { KeyValue } from "../store/store.js";
import { parseRegistryKey } from "./registry-key.js";

/** Body of `PUT /v1/upstreams/{name}/nodes/{id}`: the node and how long its lease lasts. */
export const registrationSchema = z.strictObject({
  ...nodeSchema.shape,
  /** Seconds the registration lives without a renewal; default 10. */
  ttlSeconds: z.int().min(1).max(3_600).default(10),
});
export type RegistrationInput = z.input<typeof registrationSchema>;
export type Registration = z.output<typeof registrationSchema>;

/** The value under a registry key. Not strict: a newer control plane may add fields. */
export const storedRegistrationSchema = z.object({
  address: nodeSchema.shape.address,
  weight: z.int().min(1).max(1_000),
  ttlSeconds: z.int().min(1),
  /** ISO time the node first registered under this key (kept across renewals and updates). */
  registeredAt: z.string(),
});
export type StoredRegistration = z.output<typeof storedRegistrationSchema>;

/** A node as the registry holds it. */
export interface RegisteredNode extends StoredRegistration {
  upstream: string;
  id: string;
  /** Lease the key is bound to; absent only for a key written around the API. */
  lease?: string;
  /** The key's mod revision. */
  revision: number;
}

/** Registered nodes by upstream, each list sorted by node id. */
export type RegistryNodes = ReadonlyMap<string, readonly RegisteredNode[]>;

export interface RegistryRead {
  nodes: Map<string, RegisteredNode[]>;
  /** Registry keys whose value is not a registration (written around the API). */
  invalid: { key: string; reason: string }[];
}

/** Parses one stored registration value. */
export function parseRegistration(
  value: string,
): { ok: true; registration: StoredRegistration } | { ok: false; reason: string } {
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return { ok: false, reason: "not JSON" };
  }
  const parsed = storedRegistrationSchema.safeParse(json);
  if (!parsed.success) {
    return { ok: false, reason: parsed.error.issues.map(describeIssue).join("; ") };
  }
  return { ok: true, registration: parsed.data };
}

/** Picks the registry keys out of a range read (other keys are skipped) and parses them. */
export function readRegistryNodes(prefix: string, items: readonly KeyValue[]): RegistryRead {
  const nodes = new Map<string, RegisteredNode[]>();
  const invalid: RegistryRead["invalid"] = [];
  for (const item of items) {
    const where = parseRegistryKey(prefix, item.key);
    if (where === undefined) continue;
    const parsed = parseRegistration(item.value);
    if (!parsed.ok) {
      invalid.push({ key: item.key, reason: parsed.reason });
      continue;
    }
    const node: RegisteredNode = { ...where, ...parsed.registration, revision: item.modRevision };
    if (item.lease !== undefined) node.lease = item.lease;
    const list = nodes.get(where.upstream);
    if (list === undefined) nodes.set(where.upstream, [node]);
    else list.push(node);
  }
  for (const list of nodes.values()) list.sort((a, b) => compare(a.id, b.id));
  return { nodes, invalid };
}

// Code-unit order, not localeCompare: snapshots must not depend on the host's locale.
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
