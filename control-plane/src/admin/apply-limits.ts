/**
 * How big one POST /v1/apply may be. 20,000 resources of a few KB each (about 50 MB of JSON)
 * fit; bigger requests get 413 naming the limit they broke, before anything is read or written.
 */
export const APPLY_BODY_LIMIT_BYTES = 64 * 1024 * 1024;
export const APPLY_MAX_RESOURCES = 50_000;
