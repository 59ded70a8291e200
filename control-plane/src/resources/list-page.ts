import { clawgateError, type Outcome } from "./errors.js";

/**
 * Items per page of GET /v1/{kind} when the client names no `limit`: about 40 KB of routes, so
 * one page never holds the event loop or the client long, even with 10,000 routes.
 */
export const DEFAULT_PAGE_LIMIT = 100;
/** Most items one page may ask for: a few hundred KB at most. */
export const MAX_PAGE_LIMIT = 500;

/**
 * The opaque `continue` token of a list page: the name the page ended at, so the next page
 * starts after it (names sort in code-unit order). Opaque to clients, as Kubernetes' is: they
 * pass it back, never build it, so its form may change.
 */
export function continueToken(lastName: string): string {
  return Buffer.from(JSON.stringify({ after: lastName })).toString("base64url");
}

/** The name a `continue` token resumes after, or why the token is not one of ours. */
export function parseContinueToken(token: string): Outcome<{ after: string }> {
  try {
    const parsed = JSON.parse(Buffer.from(token, "base64url").toString("utf8")) as unknown;
    const after = (parsed as { after?: unknown } | null)?.after;
    if (typeof after === "string") return { ok: true, after };
  } catch {
    // Falls through to the refusal below.
  }
  return {
    ok: false,
    error: clawgateError(
      "CLAWGATE_INVALID_REQUEST",
      "continue: not a token this API gave; pass the continue value of the previous page unchanged",
    ),
  };
}

/** Index of the first of `sorted` (code-unit order) that comes after `after`; 0 without one. */
export function firstAfter(sorted: readonly string[], after: string | undefined): number {
  if (after === undefined) return 0;
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((sorted[middle] as string) <= after) low = middle + 1;
    else high = middle;
  }
  return low;
}

// Code-unit order, not localeCompare: the order pages resume in must not depend on the locale.
export function byCodeUnits(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
