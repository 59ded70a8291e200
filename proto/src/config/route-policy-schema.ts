import { z } from "zod";
import { CIDR_RULE, parseCidr } from "./cidr.js";
import {
  AUTH_MODES,
  DEFAULT_CORS_MAX_AGE_SECONDS,
  isHeaderValue,
  transformHeaderProblem,
} from "./route-policy-rules.js";
import { isHeaderName, METHOD } from "./route-rules.js";

/** The route fields of the policy chain (auth, CORS, IP filters, header transforms, body limit). */

const cidr = z.string().superRefine((value, ctx) => {
  const parsed = parseCidr(value);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: `${CIDR_RULE}; ${parsed.reason}` });
});

const headerValue = z.string().max(8192).refine(isHeaderValue, "must hold no control characters");

const headerTransform = (side: "request" | "response") => {
  const name = z.string().superRefine((value, ctx) => {
    const problem = transformHeaderProblem(value, side);
    if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem });
  });
  return z.strictObject({
    /** Header name (lower case) to the value it gets, replacing any the message had. */
    set: z.record(name, headerValue).default({}),
    /** Lower-case header names removed. */
    remove: z.array(name).default([]),
  });
};

const corsSchema = z
  .strictObject({
    /** Origins answered with CORS headers, exactly as browsers send them, or "*". */
    allowOrigins: z
      .array(
        z
          .string()
          .regex(/^(\*|https?:\/\/[^\s/?#]+)$/, 'must be "*" or scheme://host[:port], no path'),
      )
      .min(1),
    /** Methods a preflight may ask for; empty allows the one asked. */
    allowMethods: z.array(z.string().regex(METHOD, "must be an upper-case method")).default([]),
    /** Request headers a preflight may ask for; empty allows those asked. */
    allowHeaders: z.array(z.string().refine(isHeaderName, "must be a header name")).default([]),
    /** Response headers scripts may read. */
    exposeHeaders: z.array(z.string().refine(isHeaderName, "must be a header name")).default([]),
    /** How long a browser may cache a preflight's answer; default 600. */
    maxAgeSeconds: z.int().min(0).max(86_400).default(DEFAULT_CORS_MAX_AGE_SECONDS),
    /** Let browsers send cookies and credentials; default false. */
    allowCredentials: z.boolean().default(false),
  })
  .superRefine((cors, ctx) => {
    // The Fetch standard refuses credentials with a wildcard origin.
    if (cors.allowCredentials && cors.allowOrigins.includes("*")) {
      ctx.addIssue({
        code: "custom",
        path: ["allowCredentials"],
        message: 'cannot be true with allowOrigins "*"; list the origins',
      });
    }
  });

export const routePolicyFields = {
  /** Tenants' API keys: "required" (401 without one) or "optional"; absent: no auth. */
  auth: z.strictObject({ tenants: z.enum(AUTH_MODES) }).optional(),
  /** Preflights answered by the gateway, CORS headers added to responses; absent: off. */
  cors: corsSchema.optional(),
  /** Client address blocks let in; empty lets every address in. */
  ipAllow: z.array(cidr).max(1000).default([]),
  /** Client address blocks refused with 403, checked before ipAllow. */
  ipDeny: z.array(cidr).max(1000).default([]),
  /** Headers set and removed on the request sent upstream. */
  requestHeaders: headerTransform("request").optional(),
  /** Headers set and removed on the response sent to the client. */
  responseHeaders: headerTransform("response").optional(),
  /** Largest request body accepted (declared or streamed), 413 above; 0 is no limit. */
  maxBodyBytes: z.int().min(0).max(Number.MAX_SAFE_INTEGER).default(0),
  /** Token usage of model traffic; absent: requests and responses pass as they are. */
  usage: z
    .strictObject({
      /**
       * Adds stream_options.include_usage to OpenAI-style streaming requests (JSON object bodies
       * an upstream may read as streaming, whatever their Content-Type; one over the data
       * plane's STREAM_USAGE_BODY_LIMIT is scanned as it streams and sent chunked), so streams
       * report usage for token budgets; the client only sees the usage chunk if it asked for it.
       * An encoded or UTF-16/32 body is refused with 415. Default false.
       */
      injectStreamUsage: z.boolean().default(false),
    })
    .optional(),
};
