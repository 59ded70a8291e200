import { isResourceName, RESOURCE_NAME_RULE, type ResourceKind } from "@clawgate/proto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import {
  NOTHING_ALLOWED,
  type RemediationAllowlist,
} from "../remediation/remediation-allowlist.js";
import type { AlsoWrites, ConfigService, ResourceChange } from "../resources/config-service.js";
import { clawgateError, type FieldProblem } from "../resources/errors.js";
import type { RolloutController } from "../rollout/rollout-controller.js";
import type { Operation } from "../store/store.js";
import { applyBody, applyResponse, errorResponse } from "./api-schemas.js";
import { APPLY_BODY_LIMIT_BYTES, APPLY_MAX_RESOURCES } from "./apply-limits.js";
import { type AuditSink, auditOperations } from "./audit-write.js";
import { sendError } from "./errors.js";
import { parseKind } from "./kind-name.js";
import { remediationGuard } from "./remediation-guard.js";

export interface ApplyRouteOptions {
  config: ConfigService;
  /** Runs applies that carry `rollout`; without it such an apply is refused. Default none. */
  rollouts?: Pick<RolloutController, "apply"> | undefined;
  /** Journals each write with its token's name; default none. */
  audit?: AuditSink;
  /** What an upstream's remediation may run; default nothing (remediation writes refused). */
  remediationAllowlist?: RemediationAllowlist;
}

/** POST /v1/apply: several resources in one transaction, with dry run and prune. */
export const applyRoute: FastifyPluginAsyncZod<ApplyRouteOptions> = async (
  app,
  { config, audit, rollouts, remediationAllowlist = NOTHING_ALLOWED },
) => {
  app.post(
    "/v1/apply",
    {
      bodyLimit: APPLY_BODY_LIMIT_BYTES,
      schema: {
        tags: ["apply"],
        summary: "Create or update several resources atomically",
        body: applyBody,
        response: {
          200: applyResponse,
          400: errorResponse,
          401: errorResponse,
          403: errorResponse,
          404: errorResponse,
          409: errorResponse,
          413: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const { resources, dryRun, prune, rollout } = request.body;
      if (resources.length > APPLY_MAX_RESOURCES) {
        return sendError(
          reply,
          clawgateError(
            "CLAWGATE_PAYLOAD_TOO_LARGE",
            `resources lists ${resources.length} resources; one apply may hold at most ${APPLY_MAX_RESOURCES}`,
          ),
        );
      }
      const problems: FieldProblem[] = [];
      const changes: ResourceChange[] = [];
      resources.forEach((resource, index) => {
        const kind = parseKind(resource.kind);
        if (kind === undefined) {
          problems.push({
            path: `resources.${index}.kind`,
            message: `unknown kind ${resource.kind}`,
          });
          return;
        }
        if (!isResourceName(resource.name)) {
          // Named by its place in the request, as a bad kind is, so a long manifest's bad entry
          // is found without searching for the name.
          problems.push({
            path: `resources.${index}.name`,
            message: `name ${JSON.stringify(resource.name)} ${RESOURCE_NAME_RULE}`,
          });
          return;
        }
        changes.push({ kind, name: resource.name, document: resource.spec });
      });
      let pruneKinds: boolean | ResourceKind[] = false;
      if (Array.isArray(prune)) {
        pruneKinds = [];
        prune.forEach((name, index) => {
          const kind = parseKind(name);
          if (kind === undefined) {
            problems.push({ path: `prune.${index}`, message: `unknown kind ${name}` });
          } else {
            (pruneKinds as ResourceKind[]).push(kind);
          }
        });
      } else {
        pruneKinds = prune;
      }
      if (problems.length > 0) {
        const message = problems.map((p) => `${p.path}: ${p.message}`).join("; ");
        return sendError(reply, clawgateError("CLAWGATE_INVALID_REQUEST", message, problems));
      }
      const write = (also: Operation[]) =>
        config.apply(changes, {
          dryRun,
          prune: pruneKinds,
          vet: remediationGuard(request.caller, remediationAllowlist),
          alsoWrite: (results, writes) =>
            withCommit(auditOperations(audit, request, results, writes), also),
        });
      if (rollout !== undefined && rollouts === undefined) {
        return sendError(
          reply,
          clawgateError("CLAWGATE_INVALID_REQUEST", "rollout: this control plane runs no rollouts"),
        );
      }
      const result =
        rollout === undefined || dryRun || rollouts === undefined
          ? await write([])
          : await rollouts.apply(rollout, request.caller?.name ?? "anonymous", write);
      if (!result.ok) return sendError(reply, result.error);
      return { revision: result.revision, dryRun: result.dryRun, results: result.results };
    },
  );
};

/** `also` added to the operations that commit with the write. */
function withCommit(
  journal: Operation[] | AlsoWrites,
  also: Operation[],
): Operation[] | AlsoWrites {
  if (also.length === 0) return journal;
  return Array.isArray(journal)
    ? [...journal, ...also]
    : { ...journal, commit: [...journal.commit, ...also] };
}
