import { issueFields } from "@clawgate/proto";

/**
 * The control plane's error catalog: every error the config service and the admin API return
 * has one of these codes and its HTTP status. Callers branch on `code`, never on message text.
 */
export const ERROR_CATALOG = {
  /** A resource document fails its schema; details list each bad field. */
  CLAWGATE_INVALID_RESOURCE: { status: 400, message: "resource is invalid" },
  /** A resource name does not match [a-z0-9][a-z0-9-]{0,62}. */
  CLAWGATE_INVALID_NAME: { status: 400, message: "resource name is invalid" },
  /** A request is malformed: not JSON, wrong shape, bad header. */
  CLAWGATE_INVALID_REQUEST: { status: 400, message: "request is invalid" },
  /** The bearer token is missing or wrong. */
  CLAWGATE_UNAUTHORIZED: { status: 401, message: "a valid bearer token is required" },
  /** The token is valid but its role does not allow this endpoint; the message names the role needed. */
  CLAWGATE_FORBIDDEN: { status: 403, message: "the token's role does not allow this request" },
  /** The resource does not exist. */
  CLAWGATE_NOT_FOUND: { status: 404, message: "resource not found" },
  /** The path names no resource kind (upstreams, routes, breakers, tenants). */
  CLAWGATE_UNKNOWN_KIND: { status: 404, message: "unknown resource kind" },
  /** No endpoint answers this method and path. */
  CLAWGATE_ENDPOINT_NOT_FOUND: { status: 404, message: "no such endpoint" },
  /** The write would leave a reference dangling (route to missing upstream, ...). */
  CLAWGATE_REFERENCE_CONFLICT: { status: 409, message: "write would break a reference" },
  /** The write gives a tenant an API key hash another tenant holds; the message names both. */
  CLAWGATE_TENANT_KEY_CONFLICT: { status: 409, message: "another tenant holds this API key" },
  /** Concurrent writers kept winning; retrying the request may succeed. */
  CLAWGATE_STORE_CONFLICT: { status: 409, message: "config changed concurrently, try again" },
  /** A config version that is not in the history (never written, or not a config write). */
  CLAWGATE_VERSION_NOT_FOUND: { status: 404, message: "config version not found" },
  /** A config version older than the history keeps (historyLimit), so it cannot be rebuilt. */
  CLAWGATE_VERSION_TOO_OLD: { status: 409, message: "config version is no longer kept" },
  /** A progressive rollout is baking: config writes wait until it is promoted or aborted. */
  CLAWGATE_ROLLOUT_IN_PROGRESS: { status: 409, message: "a rollout is in progress" },
  /** A rollout cannot start (nothing published, no data plane to be a canary). */
  CLAWGATE_ROLLOUT_REFUSED: { status: 409, message: "the rollout cannot start" },
  /** If-Match named a revision the resource is not at. */
  CLAWGATE_PRECONDITION_FAILED: { status: 412, message: "resource revision does not match" },
  /** The request body is larger than the API accepts. */
  CLAWGATE_PAYLOAD_TOO_LARGE: { status: 413, message: "request body is too large" },
  /** The request body is not JSON. */
  CLAWGATE_UNSUPPORTED_MEDIA_TYPE: { status: 415, message: "request body must be JSON" },
  /** A stored document no longer parses (it was written around the admin API). */
  CLAWGATE_CORRUPT_RESOURCE: { status: 500, message: "stored resource is invalid" },
  /** An unexpected failure; the log says what happened. */
  CLAWGATE_INTERNAL: { status: 500, message: "internal error" },
  /** The config store could not be reached. */
  CLAWGATE_STORE_UNAVAILABLE: { status: 503, message: "config store is unavailable" },
} as const satisfies Record<string, { status: number; message: string }>;

export type ErrorCode = keyof typeof ERROR_CATALOG;

/** One invalid field: `path` is dotted ("match.pathPrefix", "nodes.0.weight"). */
export interface FieldProblem {
  path: string;
  message: string;
  /** Set when the problem belongs to one resource of several (POST /v1/apply). */
  kind?: string;
  name?: string;
}

export interface ClawgateError {
  code: ErrorCode;
  status: number;
  message: string;
  details?: unknown;
}

/** Builds a catalog error; `message` replaces the catalog's generic text. */
export function clawgateError(code: ErrorCode, message?: string, details?: unknown): ClawgateError {
  const entry = ERROR_CATALOG[code];
  const error: ClawgateError = { code, status: entry.status, message: message ?? entry.message };
  if (details !== undefined) error.details = details;
  return error;
}

/** A tagged result: the value's fields with `ok: true`, or the error. */
export type Outcome<T extends object> = ({ ok: true } & T) | { ok: false; error: ClawgateError };

/** Zod issues as field problems, each unknown key named by its own path (see issueFields). */
export function fieldProblems(issues: Parameters<typeof issueFields>[0]): FieldProblem[] {
  return issueFields(issues).map(({ field, message }) => ({ path: field, message }));
}
