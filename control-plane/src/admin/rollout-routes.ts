import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { clawgateError } from "../resources/errors.js";
import type { RolloutController } from "../rollout/rollout-controller.js";
import { ROLLOUT_STATES } from "../rollout/rollout-state.js";
import { errorResponse } from "./api-schemas.js";
import { sendError } from "./errors.js";

export interface RolloutRoutesOptions {
  rollouts: Pick<RolloutController, "view" | "promote" | "abort">;
}

const counts = z.object({ requests: z.number(), failures: z.number() });

const rolloutBody = z.object({
  state: z.enum(ROLLOUT_STATES),
  version: z.int().optional(),
  baseVersion: z.int(),
  canaries: z.array(z.string()),
  spec: z.object({
    canary: z.union([z.int(), z.string()]),
    bakeSeconds: z.int(),
    maxErrorRatio: z.number(),
    minRequests: z.int(),
  }),
  author: z.string(),
  startedAt: z.string(),
  bakeUntil: z.string(),
  finishedAt: z.string().optional(),
  reason: z.string().optional(),
  rollbackVersion: z.int().optional(),
  outcomes: z.object({ canary: counts, rest: counts }).optional(),
  /** While it bakes: failing (rolled back next), passing, or inconclusive (too few requests). */
  verdict: z
    .object({ kind: z.enum(["failing", "passing", "inconclusive"]), reason: z.string().optional() })
    .optional(),
});

const errors = { 401: errorResponse, 403: errorResponse, 404: errorResponse, 409: errorResponse };
const tags = ["rollout"];

/** GET /v1/rollout, POST /v1/rollout/promote and POST /v1/rollout/abort. */
export const rolloutRoutes: FastifyPluginAsyncZod<RolloutRoutesOptions> = async (
  app,
  { rollouts },
) => {
  app.get(
    "/v1/rollout",
    {
      schema: {
        tags,
        summary: "The rollout in progress, or the last one: canaries, state, outcomes, reason",
        response: { 200: rolloutBody, ...errors },
      },
    },
    async (_request, reply) => {
      const view = rollouts.view();
      if (view === undefined) {
        return sendError(reply, clawgateError("CLAWGATE_NOT_FOUND", "no rollout has run"));
      }
      return view;
    },
  );

  app.post(
    "/v1/rollout/promote",
    {
      schema: {
        tags,
        summary: "Send the version being baked to every data plane now",
        response: { 200: rolloutBody, ...errors, 503: errorResponse },
      },
    },
    async (request, reply) => {
      const ended = await rollouts.promote(request.caller?.name ?? "anonymous");
      return ended.ok ? ended.rollout : sendError(reply, ended.error);
    },
  );

  app.post(
    "/v1/rollout/abort",
    {
      schema: {
        tags,
        summary: "Restore the config of the version before the rollout, on every data plane",
        response: { 200: rolloutBody, ...errors, 503: errorResponse },
      },
    },
    async (request, reply) => {
      const ended = await rollouts.abort(request.caller?.name ?? "anonymous");
      return ended.ok ? ended.rollout : sendError(reply, ended.error);
    },
  );
};
