/**
 * Where data planes' node-health reports are shared between control-plane replicas:
 * `{prefix}meta/health/{dataPlaneNodeId}`, one key per data plane, bound to the lease of the
 * replica that received the report. Under meta/, which the snapshot builder ignores, so a report
 * never rebuilds a snapshot.
 */

export function healthReportPrefix(prefix: string): string {
  return `${prefix}meta/health/`;
}

/** "%" and "/" in the node id are percent-encoded, so no id can nest keys; others stay as they are. */
export function healthReportKey(prefix: string, dataPlane: string): string {
  const escaped = dataPlane.replaceAll("%", "%25").replaceAll("/", "%2F");
  return `${healthReportPrefix(prefix)}${escaped}`;
}

/** The data plane a health report key belongs to; undefined for any other key. */
export function parseHealthReportKey(prefix: string, key: string): string | undefined {
  const base = healthReportPrefix(prefix);
  if (!key.startsWith(base)) return undefined;
  const rest = key.slice(base.length);
  if (rest === "" || rest.includes("/")) return undefined;
  try {
    return decodeURIComponent(rest);
  } catch {
    return undefined;
  }
}
