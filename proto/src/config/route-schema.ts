import { z } from "zod";
import {
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  DEFAULT_ROUTE_TIMEOUTS,
  DEFAULT_STALE_IF_ERROR_SECONDS,
} from "./defaults.js";
import { ms, requestPath, resourceName } from "./field-rules.js";
import { routePolicyFields } from "./route-policy-schema.js";
import {
  isHostHeader,
  isRouteHost,
  isRoutePath,
  ROUTE_HOST_RULE,
  ROUTE_PATH_RULE,
} from "./route-rules.js";

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

const routePath = z.string().refine(isRoutePath, ROUTE_PATH_RULE);

const routeMatchSchema = z
  .strictObject({
    /** Host names the route answers (no port); empty matches any host. */
    hosts: z.array(z.string().refine(isRouteHost, ROUTE_HOST_RULE)).default([]),
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

const timeouts = DEFAULT_ROUTE_TIMEOUTS;

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
         * Conditions that allow a retry; default connect failures and resets. Once a request
         * reached a node, only idempotent methods go again whatever is listed.
         */
        on: z.array(z.enum(RETRY_CONDITIONS)).default(() => [...DEFAULT_RETRY_ON]),
      })
      .prefault({}),
    timeouts: z
      .strictObject({
        connectMs: ms(1, 600_000, timeouts.connectMs),
        headersMs: ms(1, 3_600_000, timeouts.headersMs),
        bodyMs: ms(1, 3_600_000, timeouts.bodyMs),
        totalMs: ms(1, 3_600_000, timeouts.totalMs),
        /** Bounds a streaming response's silence instead of totalMs; 0 is off. */
        streamIdleMs: ms(0, 86_400_000, timeouts.streamIdleMs),
      })
      .prefault({}),
    fallback: z
      .strictObject({
        /** Serve the last good GET response this long while the upstream fails; 0 is off. */
        staleIfErrorSeconds: z.int().min(0).max(86_400).default(DEFAULT_STALE_IF_ERROR_SECONDS),
      })
      .prefault({}),
    ...routePolicyFields,
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

/** A route document with every default filled in, as stored and published. */
export type RouteDocument = z.infer<typeof routeSchema>;
