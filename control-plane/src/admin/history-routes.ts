import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ConfigHistory } from "../history/config-history.js";
import { restoreVersion } from "../history/restore-version.js";
import type { ConfigAudit } from "../journal/config-audit.js";
import { configChangeSchema } from "../journal/config-event.js";
import {
  NOTHING_ALLOWED,
  type RemediationAllowlist,
} from "../remediation/remediation-allowlist.js";
import type { ConfigService } from "../resources/config-service.js";
import { applyResponse, errorResponse } from "./api-schemas.js";
import { sendError } from "./errors.js";
import { remediationGuard } from "./remediation-guard.js";
import { readableSpec } from "./tenant-key-redaction.js";

export interface HistoryRoutesOptions {
  config: ConfigService;
  history: ConfigHistory;
  /** Journals a rollback with its author, from and to; default none. */
  audit?: Pick<ConfigAudit, "rollbackOperations">;
  /** What an upstream's remediation may run; default nothing (remediation writes refused). */
  remediationAllowlist?: RemediationAllowlist;
}

const version = z.coerce.number().int().min(1);

const historyItem = z.object({
  version: z.int(),
  time: z.string(),
  author: z.string(),
  changes: z.array(configChangeSchema),
  summary: z.string(),
  rollback: z.object({ from: z.int(), to: z.int(), reason: z.string().optional() }).optional(),
});

const historicResource = z.object({ kind: z.string(), name: z.string(), spec: z.unknown() });

const errors = {
  400: errorResponse,
  401: errorResponse,
  403: errorResponse,
  404: errorResponse,
  409: errorResponse,
};
const tags = ["history"];

/** GET /v1/history, GET /v1/history/{version} and POST /v1/rollback. */
export const historyRoutes: FastifyPluginAsyncZod<HistoryRoutesOptions> = async (
  app,
  { config, history, audit, remediationAllowlist = NOTHING_ALLOWED },
) => {
  app.get(
    "/v1/history",
    {
      schema: {
        tags,
        summary: "Config versions kept, newest first, with author, time and changes",
        querystring: z.object({
          /** Most versions returned; default every one kept. */
          limit: z.coerce.number().int().min(1).max(10_000).optional(),
        }),
        response: { 200: z.object({ items: z.array(historyItem) }), ...errors },
      },
    },
    async (request) => ({ items: await history.list(request.query.limit) }),
  );

  app.get(
    "/v1/history/:version",
    {
      schema: {
        tags,
        summary: "One config version and the whole config as it was then (apply's resource shape)",
        params: z.object({ version }),
        response: {
          200: historyItem.extend({ resources: z.array(historicResource) }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const at = await history.at(request.params.version);
      if (!at.ok) return sendError(reply, at.error);
      const resources = at.resources.map((resource) => ({
        ...resource,
        spec: readableSpec(resource.kind, resource.spec, request.caller),
      }));
      return { ...at.item, resources };
    },
  );

  app.post(
    "/v1/rollback",
    {
      schema: {
        tags,
        summary:
          "Restore the config of an earlier version atomically, as a new version (history only grows)",
        body: z.strictObject({ version }),
        response: {
          200: applyResponse.extend({ from: z.int(), to: z.int() }),
          ...errors,
          412: errorResponse,
          503: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const result = await restoreVersion({
        config,
        history,
        audit,
        version: request.body.version,
        author: request.caller?.name,
        vet: remediationGuard(request.caller, remediationAllowlist),
      });
      if (!result.ok) return sendError(reply, result.error);
      const { mark, ...applied } = result;
      return { ...applied, from: mark.from, to: request.body.version };
    },
  );
};
