import type { KeyValue } from "../store/store.js";

/** The gone marker's value; `reason` tells an expiry from an explicit deregistration. */
export interface GoneMarker {
  reason: "deregistered" | "expired";
  /** For "expired": the revision that deleted the key. "deregistered" is written in that commit. */
  revision?: number;
}

function readMarker(marker: KeyValue | undefined): Partial<GoneMarker> | undefined {
  if (marker === undefined) return undefined;
  try {
    return JSON.parse(marker.value) as Partial<GoneMarker>;
  } catch {
    return undefined;
  }
}

export function isDeregistration(marker: KeyValue | undefined): boolean {
  return readMarker(marker)?.reason === "deregistered";
}

/** The newest delete revision the marker accounts for; 0 when there is none. */
export function coveredRevision(marker: KeyValue | undefined): number {
  const parsed = readMarker(marker);
  if (marker === undefined || parsed === undefined) return 0;
  // A deregistration writes its marker in the commit that deletes the key: same revision.
  if (parsed.reason === "deregistered") return marker.modRevision;
  return typeof parsed.revision === "number" ? parsed.revision : 0;
}
