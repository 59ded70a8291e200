import {
  RESOURCE_KINDS,
  type ResourceDocuments,
  type ResourceKind,
  validateResource,
} from "@clawgate/proto";
import type { RangeResult } from "../store/store.js";

/** Where a resource lives in the store: `{prefix}{kind}/{name}`, kind in its plural form. */
export function resourceKey(prefix: string, kind: ResourceKind, name: string): string {
  return `${prefix}${kind}/${name}`;
}

export interface StoredResource<K extends ResourceKind> {
  name: string;
  document: ResourceDocuments[K];
  /** The key's mod revision, which the admin API serves as the ETag. */
  revision: number;
}

/** Every resource of every kind, as read at one store revision. */
export type ConfigState = {
  [K in ResourceKind]: Map<string, StoredResource<K>>;
};

export interface ConfigRead {
  revision: number;
  state: ConfigState;
  /** Keys whose value is not a valid document (written around the admin API). */
  invalid: { key: string; reason: string }[];
}

export function emptyConfigState(): ConfigState {
  return { upstreams: new Map(), routes: new Map(), breakers: new Map(), tenants: new Map() };
}

/** Parses every resource document under `prefix` from one range read. */
export function readConfigState(prefix: string, range: RangeResult): ConfigRead {
  const state = emptyConfigState();
  const invalid: ConfigRead["invalid"] = [];
  for (const item of range.items) {
    const rest = item.key.slice(prefix.length);
    const slash = rest.indexOf("/");
    const kind = rest.slice(0, slash) as ResourceKind;
    if (slash < 0 || !RESOURCE_KINDS.includes(kind)) continue;
    const name = rest.slice(slash + 1);
    let json: unknown;
    try {
      json = JSON.parse(item.value);
    } catch {
      invalid.push({ key: item.key, reason: "not JSON" });
      continue;
    }
    const parsed = validateResource(kind, name, json);
    if (!parsed.ok) {
      invalid.push({ key: item.key, reason: parsed.problems.map(describeProblem).join("; ") });
      continue;
    }
    (state[kind] as Map<string, StoredResource<ResourceKind>>).set(name, {
      name,
      document: parsed.document,
      revision: item.modRevision,
    });
  }
  return { revision: range.revision, state, invalid };
}

function describeProblem(problem: { field: string; message: string }): string {
  return problem.field ? `${problem.field}: ${problem.message}` : problem.message;
}

export function describeIssue(issue: { path: PropertyKey[]; message: string }): string {
  const path = issue.path.map(String).join(".");
  return path ? `${path}: ${issue.message}` : issue.message;
}
