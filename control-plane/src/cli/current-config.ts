import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";
import { stringify } from "yaml";
import type { AdminClient } from "./admin-client.js";
import type { ResourceView } from "./command-context.js";
import { listAll } from "./list-pages.js";

/** Every resource of every kind, as `GET /v1/{kind}` answers them, every page. */
export type ConfigListing = Map<ResourceKind, ResourceView[]>;

export async function readCurrentConfig(api: AdminClient): Promise<ConfigListing> {
  const lists = await Promise.all(RESOURCE_KINDS.map((kind) => listAll(api, kind)));
  return new Map(RESOURCE_KINDS.map((kind, index) => [kind, lists[index]?.items ?? []]));
}

/** YAML that `clawctl apply -f` takes back: one `{ kind, name, spec }` document per resource. */
export function manifestYaml(kind: ResourceKind, items: readonly ResourceView[]): string {
  return items
    .map((item) => stringify({ kind: kind.slice(0, -1), name: item.name, spec: item.spec }))
    .join("---\n");
}

/** The whole config as one manifest, breakers and upstreams before the routes naming them. */
export function dumpYaml(config: ConfigListing): string {
  const order: ResourceKind[] = ["breakers", "upstreams", "routes", "tenants"];
  const kinds = [...order, ...RESOURCE_KINDS.filter((kind) => !order.includes(kind))];
  return kinds
    .map((kind) => manifestYaml(kind, config.get(kind) ?? []))
    .filter((text) => text !== "")
    .join("---\n");
}
