/**
 * Entity tags of the admin API. A resource's ETag is its key's mod revision, quoted ("12").
 * Conditional headers are read per RFC 9110 section 13.1: If-None-Match takes "*" or a list of
 * tags compared weakly (W/"12" matches "12"), so a cache may send back either form.
 */

/** The ETag of a resource at `revision`. */
export function etag(revision: number): string {
  return `"${revision}"`;
}

/** An If-None-Match header as conditions: "*" (any current version) or these revisions. */
export type NoneMatch = "*" | readonly number[];

/**
 * Reads If-None-Match. Undefined when absent or empty (no condition). A tag that is not one of
 * our revisions is kept out of the list: it can never match, which is what the client asked.
 */
export function parseIfNoneMatch(header: string | string[] | undefined): NoneMatch | undefined {
  const value = (Array.isArray(header) ? header.join(",") : header)?.trim();
  if (value === undefined || value === "") return undefined;
  if (value === "*") return "*";
  const revisions: number[] = [];
  for (const item of value.split(",")) {
    // Quoted as the RFC writes it, or a bare number as a hand-typed curl line might.
    const match = /^(?:W\/)?(?:"(\d+)"|(\d+))$/.exec(item.trim());
    const digits = match?.[1] ?? match?.[2];
    if (digits !== undefined) revisions.push(Number(digits));
  }
  return revisions;
}

/** True when a resource at `revision` (undefined: none) matches the If-None-Match condition. */
export function noneMatchHolds(condition: NoneMatch, revision: number | undefined): boolean {
  if (revision === undefined) return false;
  return condition === "*" || condition.includes(revision);
}
