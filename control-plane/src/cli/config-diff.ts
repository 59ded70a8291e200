import { RESOURCE_KINDS, type ResourceKind, resourceSchemas } from "@clawgate/proto";
import { parseKind } from "../admin/kind-name.js";
import { fieldProblems } from "../resources/errors.js";
import { diffFields, type ResourceDiff } from "./field-diff.js";
import type { ManifestResource } from "./manifest.js";

/** The store's documents by kind and name, as `GET /v1/{kind}` answers them. */
export type CurrentConfig = ReadonlyMap<ResourceKind, ReadonlyMap<string, unknown>>;

export type ConfigDiffResult =
  | { ok: true; diffs: ResourceDiff[] }
  | { ok: false; problems: string[] };

/**
 * What `clawctl apply -f` would change, field by field. Both sides go through the kind's
 * schema first, so defaults the control plane fills on write are filled on the manifest too,
 * and a field left out of the manifest that only restates a default is no difference. With
 * `prune`, resources of the store the manifest does not name show as deleted, as
 * `apply --prune` would delete them.
 */
export function diffConfig(
  manifest: readonly ManifestResource[],
  current: CurrentConfig,
  prune: boolean,
): ConfigDiffResult {
  const problems: string[] = [];
  const wanted = new Map<ResourceKind, Map<string, unknown>>();
  for (const resource of manifest) {
    const kind = parseKind(resource.kind);
    if (kind === undefined) {
      problems.push(`${resource.kind}/${resource.name}: unknown kind ${resource.kind}`);
      continue;
    }
    const parsed = resourceSchemas[kind].safeParse(resource.spec);
    if (!parsed.success) {
      for (const problem of fieldProblems(parsed.error.issues)) {
        problems.push(`${kind}/${resource.name} ${problem.path}: ${problem.message}`);
      }
      continue;
    }
    const names = wanted.get(kind) ?? new Map<string, unknown>();
    names.set(resource.name, parsed.data);
    wanted.set(kind, names);
  }
  if (problems.length > 0) return { ok: false, problems };

  const diffs: ResourceDiff[] = [];
  for (const kind of RESOURCE_KINDS) {
    const have = current.get(kind) ?? new Map<string, unknown>();
    const want = wanted.get(kind) ?? new Map<string, unknown>();
    const names = [...new Set([...want.keys(), ...(prune ? have.keys() : [])])].sort();
    for (const name of names) {
      const after = want.get(name);
      const stored = have.get(name);
      // A stored document that no longer parses is shown as it is, not hidden.
      const before = stored === undefined ? undefined : normalised(kind, stored);
      if (before === undefined && after !== undefined) {
        diffs.push({ kind, name, action: "create", fields: diffFields(undefined, after) });
      } else if (before !== undefined && after === undefined) {
        diffs.push({ kind, name, action: "delete", fields: diffFields(before, undefined) });
      } else {
        const fields = diffFields(before, after);
        if (fields.length > 0) diffs.push({ kind, name, action: "change", fields });
      }
    }
  }
  return { ok: true, diffs };
}

function normalised(kind: ResourceKind, document: unknown): unknown {
  const parsed = resourceSchemas[kind].safeParse(document);
  return parsed.success ? parsed.data : document;
}
