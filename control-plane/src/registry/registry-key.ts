/**
 * Where registered nodes live: `{prefix}registry/{upstream}/{nodeId}`, each bound to its own
 * lease. The "gone" marker `{prefix}meta/registry-gone/{upstream}/{nodeId}` records why the
 * node's key last disappeared, so control planes agree whether a delete was an expiry
 * (journaled once) or an explicit deregistration (not journaled as one). It sits under meta/,
 * which the snapshot builder ignores.
 */

export function registryPrefix(prefix: string, upstream?: string): string {
  return upstream === undefined ? `${prefix}registry/` : `${prefix}registry/${upstream}/`;
}

export function registryKey(prefix: string, upstream: string, id: string): string {
  return `${prefix}registry/${upstream}/${id}`;
}

/** Where every gone marker lives. */
export function registryGonePrefix(prefix: string): string {
  return `${prefix}meta/registry-gone/`;
}

export function registryGoneKey(prefix: string, upstream: string, id: string): string {
  return `${prefix}meta/registry-gone/${upstream}/${id}`;
}

/** Splits a registry key into its upstream and node id; undefined for any other key. */
export function parseRegistryKey(
  prefix: string,
  key: string,
): { upstream: string; id: string } | undefined {
  const base = registryPrefix(prefix);
  if (!key.startsWith(base)) return undefined;
  const rest = key.slice(base.length);
  const slash = rest.indexOf("/");
  if (slash <= 0 || slash === rest.length - 1 || rest.indexOf("/", slash + 1) >= 0) {
    return undefined;
  }
  return { upstream: rest.slice(0, slash), id: rest.slice(slash + 1) };
}
