/**
 * What changed between two versions' whole configs (GET /v1/history/{version} resources):
 * each resource added, removed or changed, by kind and name.
 */
export function diffConfigs(before, after) {
  const key = (r) => `${r.kind}/${r.name}`;
  const old = new Map(before.map((r) => [key(r), r]));
  const changes = [];
  for (const resource of after) {
    const previous = old.get(key(resource));
    old.delete(key(resource));
    if (previous === undefined)
      changes.push({
        change: "added",
        kind: resource.kind,
        name: resource.name,
        after: resource.spec,
      });
    else if (stable(previous.spec) !== stable(resource.spec)) {
      changes.push({
        change: "changed",
        kind: resource.kind,
        name: resource.name,
        before: previous.spec,
        after: resource.spec,
      });
    }
  }
  for (const resource of old.values()) {
    changes.push({
      change: "removed",
      kind: resource.kind,
      name: resource.name,
      before: resource.spec,
    });
  }
  return changes.sort((a, b) => key(a).localeCompare(key(b)));
}

/** JSON with sorted keys, so the same document written in another order is not a change. */
export function stable(value) {
  return JSON.stringify(value, (_key, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)))
      : v,
  );
}

/**
 * The leaves that differ between two documents, as "path: before -> after" rows (arrays are
 * compared whole), so a changed route reads as one line rather than two whole documents.
 */
export function fieldChanges(before, after) {
  const left = leaves(before);
  const right = leaves(after);
  const paths = [...new Set([...left.keys(), ...right.keys()])].sort();
  return paths
    .filter((path) => left.get(path) !== right.get(path))
    .map((path) => ({ path, before: left.get(path), after: right.get(path) }));
}

function leaves(value, path = "", into = new Map()) {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [key, child] of Object.entries(value)) {
      leaves(child, path === "" ? key : `${path}.${key}`, into);
    }
  } else {
    into.set(path, stable(value));
  }
  return into;
}
