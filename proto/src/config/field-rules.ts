import { z } from "zod";
import { parseNodeAddress } from "./node-address.js";
import { type RequestPathRules, requestPathProblem } from "./origin-form.js";
import { RESOURCE_NAME, RESOURCE_NAME_RULE } from "./resource-name.js";
import { CONTROL_CHARACTER } from "./route-rules.js";

/** Field types several resource schemas share, each built on the one predicate for its rule. */

export const resourceName = z.string().regex(RESOURCE_NAME, RESOURCE_NAME_RULE);

/** Integer milliseconds within bounds, with its default. */
export const ms = (min: number, max: number, fallback: number) =>
  z.int().min(min).max(max).default(fallback);

export const nodeAddress = z.string().superRefine((value, ctx) => {
  const parsed = parseNodeAddress(value);
  if (!parsed.ok) ctx.addIssue({ code: "custom", message: `must be host:port; ${parsed.reason}` });
});

/** A path the gateway writes into a request line itself: origin-form, nothing to escape. */
export const requestPath = (rules: RequestPathRules, example: string) =>
  z.string().superRefine((value, ctx) => {
    const problem = requestPathProblem(value, rules);
    if (problem !== undefined) {
      ctx.addIssue({ code: "custom", message: `must be a path like ${example}; it ${problem}` });
    }
  });

/** Text with no CR, LF or other control character, so it cannot split a line it lands on. */
export const lineText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((value) => !CONTROL_CHARACTER.test(value), "must hold no control characters");
