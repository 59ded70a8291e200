import { RESOURCE_KINDS } from "@clawgate/proto";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { RolloutController } from "../rollout/rollout-controller.js";
import { sendError } from "./errors.js";

/** Routes that write config, each a new version that would go to the canaries alone. */
const CONFIG_WRITES = new Set([
  "/v1/apply",
  "/v1/rollback",
  ...RESOURCE_KINDS.map((kind) => `/v1/${kind}/:name`),
]);

/**
 * While a rollout bakes, config writes are refused with 409 naming it: a second version on top
 * would reach the canaries only, be judged with the first, and be undone by its rollback. A
 * dry run writes nothing and still answers; registry writes (nodes) are not config versions.
 */
export function rolloutWriteGuard(rollouts: Pick<RolloutController, "inProgressError">) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (request.method === "GET" || request.method === "HEAD") return;
    if (!CONFIG_WRITES.has(request.routeOptions.url ?? "")) return;
    if ((request.body as { dryRun?: unknown } | undefined)?.dryRun === true) return;
    const error = rollouts.inProgressError();
    if (error !== undefined) return sendError(reply, error);
  };
}
