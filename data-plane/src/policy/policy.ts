import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { Route, Tenant } from "@clawgate/proto";
import type { Clock } from "../clock/clock.js";
import type { ErrorCode } from "../errors/error-catalog.js";
import type { TenantMetrics } from "../metrics/tenant-metrics.js";
import type { LeaseBook } from "../quota/lease-book.js";
import type { TenantKeys } from "./tenant-keys.js";

/**
 * The route policy chain's contract. A policy is one file that exports a PolicyFactory; the
 * factory is compiled once per route per snapshot (policy-list.ts gives the order), and a
 * route that does not use a policy gets none of it: a route without policies holds an empty
 * chain and the pipeline skips the policy stage entirely.
 */

/** What a factory sees when it compiles a route; everything comes from the snapshot. */
export interface PolicyCompileContext {
  /** The route as it came in the snapshot, defaults filled by the control plane. */
  readonly route: Route;
  /**
   * The snapshot's tenants by name. Whether there are any may shape a route's chain; a policy
   * never keeps them (a tenant change recompiles no route): keys are looked up through the
   * request (PolicyRequest.tenantKeys).
   */
  readonly tenants: ReadonlyMap<string, Tenant>;
}

/** Compiles the policy for one route; undefined when the route does not use it. */
export interface PolicyFactory {
  /** Lower-case, kebab-case; used in logs. */
  readonly name: string;
  compile(context: PolicyCompileContext): Policy | undefined;
}

/** The tenant a request was authenticated as (set by the auth policy, first in the chain). */
export interface PolicyTenant {
  readonly name: string;
  readonly source: Tenant;
}

/**
 * One request as the policies see it. The proxy's own per-request object implements it, so
 * running the chain allocates nothing for the request itself.
 */
export interface PolicyRequest {
  /** The client's request: method, url, headers, socket (for the peer address). */
  readonly req: IncomingMessage;
  readonly requestId: string;
  /**
   * The tenants' keys of the snapshot this request was routed by: the request sees that one
   * snapshot throughout, whatever is swapped in meanwhile.
   */
  readonly tenantKeys: TenantKeys;
  /**
   * Request headers forwarded upstream, flat [name, value, ...], lower-case names. A policy
   * edits this list in place (removing the API key, setting x-clawgate-tenant).
   */
  readonly headers: string[];
  /** Set by the auth policy; undefined on a route without auth or an optional one without key. */
  tenant: PolicyTenant | undefined;
  /**
   * The request body's bytes as the client sent them, as far as already known (Content-Length,
   * or counted as it was read); undefined or absent: not known.
   */
  readonly bodyBytesIn?: number | undefined;
}

/**
 * Long-lived state a policy may need that outlives snapshots (counters, clocks); handed to
 * every call, built once per proxy handler.
 */
export interface PolicyServices {
  readonly clock: Clock;
  /** Leases on fleet-wide tenant budgets; absent: requestsPerMinute and token budgets are not held. */
  readonly quota?: LeaseBook;
  /** clawgate_tenant_requests_total and clawgate_tenant_tokens_total; absent: not counted. */
  readonly tenantMetrics?: TenantMetrics;
}

/**
 * A policy's answer in place of the upstream's. `error`: a catalog error (401, 403, 413,
 * 429...), with Retry-After when `retryAfterMs` is set. `respond`: an answer of the policy's
 * own with an empty body (a CORS preflight's 204). `wait`: the request waits (a fleet share
 * asked for), then this policy runs again (run-policies.ts).
 */
export type PolicyAnswer =
  | { readonly kind: "error"; readonly code: ErrorCode; readonly retryAfterMs?: number }
  /** Not yet: run this policy again once `ready` settles (it must then answer otherwise). */
  | { readonly kind: "wait"; readonly ready: Promise<void> }
  | {
      readonly kind: "respond";
      readonly status: number;
      readonly headers: Readonly<Record<string, string>>;
    };

/** Follows one response as it streams to the client (per request state lives here). */
export interface ResponseObserver {
  onData?(chunk: Buffer): void;
  /** The response ended complete. */
  onEnd?(): void;
}

/** A route's compiled policy. Immutable: shared by every request of the route. */
export interface Policy {
  readonly name: string;
  /**
   * Runs before the upstream is tried, in chain order: undefined lets the request go on,
   * an answer ends it (later policies and the upstream are skipped). Synchronous: it runs on
   * every request of the route.
   */
  onRequest(request: PolicyRequest, services: PolicyServices): PolicyAnswer | undefined;
  /**
   * The upstream's response head, before the client gets it: `headers` may be edited in
   * place. Returns an observer to follow the body, or undefined.
   */
  onResponse?(
    request: PolicyRequest,
    status: number,
    headers: IncomingHttpHeaders,
    services: PolicyServices,
  ): ResponseObserver | undefined;
  /**
   * The gateway answers with an error of its own (a policy's 401 or 429, a 502, a 503):
   * `headers` are added to that answer (CORS, so a browser lets the page read it).
   */
  onGatewayAnswer?(request: PolicyRequest, headers: IncomingHttpHeaders): void;
  /** The client's answer is settled with `status`, whatever answered it (counting by tenant). */
  onComplete?(request: PolicyRequest, status: number, services: PolicyServices): void;
}

/** A route's policies in chain order; frozen, empty when the route has none. */
export type PolicyChain = readonly Policy[];
