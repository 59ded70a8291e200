import { RESOURCE_KINDS, resourceName } from "@clawgate/proto";
import { z } from "zod";
import { ERROR_CATALOG, type ErrorCode } from "../resources/errors.js";
import { DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT } from "../resources/list-page.js";
import { rolloutSpecSchema } from "../rollout/rollout-state.js";

/** Request and response shapes of the admin API, declared once for validation and OpenAPI. */

export const nameParams = z.object({ name: resourceName });

export const ifMatchHeaders = z.looseObject({
  "if-match": z
    .string()
    .optional()
    .describe(
      'Write only if the resource is at this revision ("<revision>" from ETag; "0": must not exist)',
    ),
  "if-none-match": z
    .string()
    .optional()
    .describe('"*": create only, 412 if the resource exists; ETags: 412 if it is at one of them'),
});

export const ifNoneMatchHeaders = z.looseObject({
  "if-none-match": z
    .string()
    .optional()
    .describe("ETags the client holds (W/ compared weakly); 304 with no body if one is current"),
});

/** 304 carries no body. */
export const notModified = z.undefined().describe("Not modified: the ETag sent is the current one");

const errorCodes = Object.keys(ERROR_CATALOG) as [ErrorCode, ...ErrorCode[]];

export const errorResponse = z.object({
  error: z.object({
    code: z.enum(errorCodes),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});

export function resourceResponse<S extends z.ZodType>(spec: S) {
  return z.object({
    name: z.string(),
    /** The key's mod revision; also sent as the ETag. */
    revision: z.int(),
    spec,
  });
}

export function listResponse<S extends z.ZodType>(spec: S) {
  return z.object({
    items: z.array(resourceResponse(spec)),
    revision: z.int(),
    continue: z
      .string()
      .optional()
      .describe("Present when more items follow: pass it as ?continue= for the next page"),
    remainingItemCount: z
      .int()
      .optional()
      .describe("Items after this page, when more follow (as the list stands now)"),
  });
}

export const listQuery = z.object({
  limit: z.coerce
    .number()
    .int()
    .min(1)
    .max(MAX_PAGE_LIMIT)
    .default(DEFAULT_PAGE_LIMIT)
    .describe(`Items per page; default ${DEFAULT_PAGE_LIMIT}, at most ${MAX_PAGE_LIMIT}`),
  continue: z
    .string()
    .optional()
    .describe("The previous page's continue token, unchanged: the page after it"),
});

export const deleteResponse = z.object({ name: z.string(), revision: z.int() });

const kindInput = z.string().describe(`One of ${RESOURCE_KINDS.join(", ")}, plural or singular`);

export const applyBody = z.strictObject({
  resources: z
    // The count cap (APPLY_MAX_RESOURCES) is checked by the route, which answers 413 for it.
    .array(z.strictObject({ kind: kindInput, name: z.string(), spec: z.unknown() })),
  /** Check everything, write nothing; default false. */
  dryRun: z.boolean().default(false),
  /** Delete resources (of every kind, or of the kinds listed) the request does not name; default false. */
  prune: z.union([z.boolean(), z.array(kindInput)]).default(false),
  /** Send the new version to canary data planes first (see GET /v1/rollout); default none. */
  rollout: rolloutSpecSchema.optional(),
});

export const applyResponse = z.object({
  revision: z.int(),
  dryRun: z.boolean(),
  results: z.array(
    z.object({
      kind: z.enum(RESOURCE_KINDS),
      name: z.string(),
      action: z.enum(["created", "updated", "deleted", "unchanged"]),
      revision: z.int(),
    }),
  ),
});
