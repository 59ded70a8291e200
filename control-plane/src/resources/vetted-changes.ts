import type { ResourceKind } from "@clawgate/proto";
import type { ConfigModel } from "../snapshot/config-model.js";
import type { Operation } from "../store/store.js";
import { resourceKey } from "./config-state.js";

/** One resource a write changes, as `vet` sees it. */
export interface VettedChange {
  kind: ResourceKind;
  name: string;
  /** The stored document; undefined when the write creates it. */
  before: unknown;
  /** The document written; undefined when the write deletes it. */
  after: unknown;
}

/** What `plan` changes, resource by resource, for ApplyOptions.vet. */
export function vettedChanges(
  prefix: string,
  plan: {
    operations: readonly Operation[];
    results: readonly { kind: ResourceKind; name: string; action: string }[];
  },
  model: ConfigModel,
): VettedChange[] {
  const puts = new Map<string, string>();
  for (const operation of plan.operations) {
    if (operation.type === "put") puts.set(operation.key, operation.value);
  }
  return plan.results
    .filter((result) => result.action !== "unchanged")
    .map(({ kind, name }) => {
      const written = puts.get(resourceKey(prefix, kind, name));
      return {
        kind,
        name,
        before: model.get(kind, name)?.document,
        after: written === undefined ? undefined : JSON.parse(written),
      };
    });
}
