import {
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  isHostHeader,
  isRouteHost,
  isRoutePath,
  MAX_KEEP_ALIVE_TIMEOUT_MS,
  parseNodeAddress,
  RESOURCE_NAME,
  type RequestPathRules,
  ROUTE_PATH_RULE,
  requestPathProblem,
} from "@clawgate/data-plane/compiler";
import { z } from "zod";

/**
 * The config documents as platform teams write them. Declared once: the admin API validates
 * input with these, the store holds their parsed (defaulted) form, and the snapshot builder
 * reads that form. Objects are strict so a misspelt field is an error, not a silent no-op.
 */

// The predicates are the data plane compiler's own, so nothing the API accepts can be refused
// by every data plane later.
export { RESOURCE_NAME };
export const resourceName = z
  .string()
  .regex(
    RESOURCE_NAME,
    "must be 1-63 characters of a-z, 0-9 and '-', starting with a letter or digit",
  );

const ms = (min: number, max: number, fallback: number) =>
  z.int().min(min).max(max).default(fallback);

const nodeAddress = z.string().superRefine((value, ctx) => {
  const parsed = parseNodeAddress(value);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: `must be host:port; ${parsed.reason}` });
});

const routePath = z.string().refine(isRoutePath, ROUTE_PATH_RULE);

/** A path the gateway writes into a request line itself: origin-form, nothing to escape. */
const requestPath = (rules: RequestPathRules, example: string) =>
  z.string().superRefine((value, ctx) => {
    const problem = requestPathProblem(value, rules);
    if (problem !== undefined) {
      ctx.addIssue({ code: "custom", message: `must be a path like ${example}; it ${problem}` });
    }
  });

/** Text with no CR, LF or other control character, so it cannot split a line it lands on. */
const CONTROL = /\p{Cc}/u;

// A URL parser silently drops tabs and line breaks (zod's too, before any refinement), so the
// URL called would not be the one written; whitespace and controls are refused first instead.
const webhookUrl = z
  .string()
  .refine((value) => !/[\s\p{Cc}]/u.test(value), "must hold no spaces or control characters")
  .pipe(z.url({ protocol: /^https?$/ }));

export const nodeSchema = z.strictObject({
  /** host:port of the backend instance. */
  address: nodeAddress,
  /** Share of traffic relative to the other nodes; default 1. */
  weight: z.int().min(1).max(1000).default(1),
});

export const healthCheckSchema = z.strictObject({
  /** Time between probes of one node; default 10 s (seed 000). */
  intervalMs: ms(100, 3_600_000, 10_000),
  /** A probe that takes longer fails; default 3 s. */
  timeoutMs: ms(10, 60_000, 3_000),
  /** Consecutive failures that evict a node; default 2, so one lost probe never does. */
  unhealthyThreshold: z.int().min(1).max(100).default(2),
  /** Consecutive successes that readmit a node; default 2. */
  healthyThreshold: z.int().min(1).max(100).default(2),
  /**
   * HTTP path (and query) probed after TCP connects, origin-form as it goes on the request
   * line; null probes TCP only. Default /healthz.
   */
  path: requestPath({ query: true }, '"/healthz" or "/status?deep=1"')
    .nullable()
    .default("/healthz")
    .describe("Origin-form path and optional query, percent-encoded; null probes TCP only"),
  /** When set, the probe's JSON body must have this `status`. */
  expectStatus: z
    .string()
    .min(1)
    .max(256)
    .refine((value) => !CONTROL.test(value), "must hold no control characters")
    .optional(),
});

export const upstreamSchema = z
  .strictObject({
    /** Nodes from the document; nodes from the registry are merged in at snapshot time. */
    nodes: z.array(nodeSchema).max(1000).default([]),
    healthCheck: healthCheckSchema.prefault({}),
    /** Breaker policy guarding the upstream; "default" is built in. */
    breaker: resourceName.default("default"),
    /** Most connections a data plane opens to each node; default 128. */
    maxConnectionsPerNode: z.int().min(1).max(10_000).default(128),
    /**
     * An idle keep-alive connection to a node closes after this long (sooner when the node's
     * Keep-Alive header asks for less); default 4 s, undici's, below the 5 s idle timeout of
     * Node.js servers so the proxy never reuses a socket the node is closing.
     */
    keepAliveTimeoutMs: ms(1, MAX_KEEP_ALIVE_TIMEOUT_MS, DEFAULT_KEEP_ALIVE_TIMEOUT_MS),
    remediation: z
      .strictObject({
        /** argv template: {host}, {port} and {node} are filled in per argument, no shell. */
        command: z.array(z.string().min(1)).min(1).optional(),
        /** POSTed `{ upstream, node, host, port, evidence }` as JSON; a 2xx answer is success. */
        webhookUrl: webhookUrl.optional(),
        /** A command or webhook still running after this fails as a timeout; default 30 s. */
        timeoutMs: ms(100, 600_000, 30_000),
        /** Attempts per eviction (until the majority readmits the node); default 3. */
        maxAttempts: z.int().min(1).max(100).default(3),
        /** Wait after the first attempt; doubles after each one; default 5 s. */
        backoffMs: ms(100, 3_600_000, 5_000),
        /** Cap on the doubled wait; default 5 min. */
        maxBackoffMs: ms(100, 3_600_000, 300_000),
      })
      .optional(),
  })
  .superRefine((upstream, ctx) => {
    const seen = new Set<string>();
    upstream.nodes.forEach((node, index) => {
      if (seen.has(node.address)) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "address"],
          message: `duplicate node address ${node.address}`,
        });
      }
      seen.add(node.address);
    });
  });

export const HTTP_METHODS = [
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
  "TRACE",
  "CONNECT",
] as const;

export const RETRY_CONDITIONS = ["connect-failure", "reset", "timeout", "5xx"] as const;

const routeMatchSchema = z
  .strictObject({
    /** Host names the route answers (no port); empty matches any host. */
    hosts: z
      .array(z.string().refine(isRouteHost, "must be a host name or *.suffix, without port"))
      .default([]),
    /** Exact path; give this or pathPrefix. */
    path: routePath.optional(),
    /** Path prefix; the longest matching prefix wins. */
    pathPrefix: routePath.optional(),
    /** Methods the route answers; empty matches any method. */
    methods: z.array(z.enum(HTTP_METHODS)).default([]),
    /** Headers that must be present with exactly these values (names case-insensitive). */
    headers: z
      .record(z.string().regex(/^[A-Za-z0-9-]+$/, "must be a header name"), z.string())
      .default({}),
  })
  .superRefine((match, ctx) => {
    if (match.path === undefined && match.pathPrefix === undefined) {
      ctx.addIssue({ code: "custom", path: ["pathPrefix"], message: "give path or pathPrefix" });
    }
    if (match.path !== undefined && match.pathPrefix !== undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["path"],
        message: "give path or pathPrefix, not both",
      });
    }
  });

export const routeSchema = z
  .strictObject({
    match: routeMatchSchema,
    /** Breaks ties between equally specific matches; higher wins. Default 0. */
    priority: z.int().min(-1000).max(1000).default(0),
    /** Upstream that serves the route; give this or split. */
    upstream: resourceName.optional(),
    /** Weighted split across upstreams, for canaries; give this or upstream. */
    split: z
      .array(z.strictObject({ upstream: resourceName, weight: z.int().min(1).max(1000) }))
      .min(1)
      .max(16)
      .optional(),
    rewrite: z
      .strictObject({
        /** Replaces the matched path or prefix before forwarding; it goes on the request line. */
        pathPrefix: requestPath({}, '"/v2"').optional(),
        /** Host header sent upstream instead of the client's. */
        host: z.string().refine(isHostHeader, "must be host[:port]").optional(),
      })
      .optional(),
    retry: z
      .strictObject({
        /** Retries after the first attempt, each on another node; default 2. */
        attempts: z.int().min(0).max(5).default(DEFAULT_RETRY_ATTEMPTS),
        /**
         * Conditions that allow a retry; default connect failures and resets, the data plane's
         * own default, so both planes agree. Once a request reached a node, only idempotent
         * methods go again whatever is listed.
         */
        on: z.array(z.enum(RETRY_CONDITIONS)).default(() => [...DEFAULT_RETRY_ON]),
      })
      .prefault({}),
    timeouts: z
      .strictObject({
        connectMs: ms(1, 600_000, 1_000),
        headersMs: ms(1, 3_600_000, 15_000),
        bodyMs: ms(1, 3_600_000, 30_000),
        totalMs: ms(1, 3_600_000, 60_000),
      })
      .prefault({}),
    fallback: z
      .strictObject({
        /** Serve the last good GET response this long while the upstream fails; 0 is off. */
        staleIfErrorSeconds: z.int().min(0).max(86_400).default(0),
      })
      .prefault({}),
  })
  .superRefine((route, ctx) => {
    if ((route.upstream === undefined) === (route.split === undefined)) {
      ctx.addIssue({
        code: "custom",
        path: ["upstream"],
        message: "give upstream or split, exactly one",
      });
    }
    const seen = new Set<string>();
    route.split?.forEach((part, index) => {
      if (seen.has(part.upstream)) {
        ctx.addIssue({
          code: "custom",
          path: ["split", index, "upstream"],
          message: `upstream ${part.upstream} is already in the split`,
        });
      }
      seen.add(part.upstream);
    });
  });

export const breakerSchema = z
  .strictObject({
    /** Sliding window failures are counted over; default 30 s (seed 004). */
    windowMs: ms(1_000, 3_600_000, 30_000),
    /** Requests the window must hold before the failure ratio counts; default 20. */
    minRequests: z.int().min(1).max(100_000).default(20),
    /** Failure share in the window that opens the breaker; default 0.6. */
    failureRatio: z.number().gt(0).max(1).default(0.6),
    /** Consecutive transport failures that open it at any volume; default 5. */
    consecutiveFailures: z.int().min(1).max(1_000).default(5),
    /** First open period; default 30 s. */
    cooldownMs: ms(100, 3_600_000, 30_000),
    /** Each failed half-open probe multiplies the cooldown by this; default 2. */
    cooldownMultiplier: z.number().min(1).max(10).default(2),
    /** Cap on the grown cooldown; default 300 s. */
    maxCooldownMs: ms(100, 3_600_000, 300_000),
    /** Probe requests allowed at once while half-open; default 1. */
    halfOpenMaxInFlight: z.int().min(1).max(100).default(1),
    /** Consecutive probe successes that close it; default 2. */
    halfOpenSuccesses: z.int().min(1).max(100).default(2),
  })
  .superRefine((breaker, ctx) => {
    if (breaker.maxCooldownMs < breaker.cooldownMs) {
      ctx.addIssue({
        code: "custom",
        path: ["maxCooldownMs"],
        message: `must be at least cooldownMs (${breaker.cooldownMs})`,
      });
    }
  });

export const tenantSchema = z.strictObject({
  /** SHA-256 (hex) of each API key; keys themselves are never stored. */
  apiKeySha256: z.array(z.string().regex(/^[0-9a-f]{64}$/, "must be 64 hex digits")).default([]),
  /** Requests a minute; 0 is unlimited. */
  requestsPerMinute: z.int().min(0).default(0),
  /** Tokens a day; 0 is unlimited. */
  tokensPerDay: z.int().min(0).default(0),
  /** Routes the tenant may call; empty means all. */
  allowedRoutes: z.array(resourceName).default([]),
});

export type Upstream = z.infer<typeof upstreamSchema>;
export type Route = z.infer<typeof routeSchema>;
export type Breaker = z.infer<typeof breakerSchema>;
export type Tenant = z.infer<typeof tenantSchema>;

/** The four resource kinds, by their plural name as the API and the store spell it. */
export const resourceSchemas = {
  upstreams: upstreamSchema,
  routes: routeSchema,
  breakers: breakerSchema,
  tenants: tenantSchema,
} as const;

export type ResourceKind = keyof typeof resourceSchemas;
export const RESOURCE_KINDS = Object.keys(resourceSchemas) as ResourceKind[];

export interface ResourceDocuments {
  upstreams: Upstream;
  routes: Route;
  breakers: Breaker;
  tenants: Tenant;
}

/** Policy used by upstreams that name "default" when no breaker of that name is stored. */
export const DEFAULT_BREAKER_NAME = "default";
export const DEFAULT_BREAKER: Breaker = Object.freeze(breakerSchema.parse({}));
