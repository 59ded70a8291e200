import { resourceName } from "@clawgate/proto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { ConfigAudit } from "../journal/config-audit.js";
import { configChangeSchema } from "../journal/config-event.js";
import { HEAL_ACTIONS, HEAL_OUTCOMES } from "../journal/heal-event.js";
import type { Journal } from "../journal/journal.js";
import { clawgateError } from "../resources/errors.js";
import { errorResponse } from "./api-schemas.js";
import { sendError } from "./errors.js";

export interface EventsRoutesOptions {
  journal: Journal;
  /** Serves `?type=config`: the config writes journaled; default none (that type answers 404). */
  audit?: Pick<ConfigAudit, "list">;
}

/** Most events one request returns; the journal keeps 1000 by default. */
const MAX_LIMIT = 1_000;

const eventsQuery = z.object({
  /** heal (default): what the self-healing chain did; config: the config writes and who made them. */
  type: z.enum(["heal", "config"]).default("heal"),
  /** Most events returned, newest first; default 100. */
  limit: z.coerce.number().int().min(1).max(MAX_LIMIT).default(100),
  /** Only events of this upstream (heal events only). */
  upstream: resourceName.optional(),
  /** Only events at or after this time: ISO 8601 or epoch milliseconds. */
  since: z
    .string()
    .transform((value, ctx) => {
      const ms = /^\d+$/.test(value) ? Number(value) : Date.parse(value);
      if (Number.isNaN(ms)) {
        ctx.addIssue({ code: "custom", message: "must be an ISO time or epoch milliseconds" });
        return z.NEVER;
      }
      return ms;
    })
    .optional(),
});

const healEvent = z.object({
  id: z.string(),
  time: z.string(),
  upstream: z.string(),
  node: z.string().optional(),
  action: z.enum(HEAL_ACTIONS),
  evidence: z.string().optional(),
  outcome: z.enum(HEAL_OUTCOMES).optional(),
  source: z.string(),
  /** Summary events only: the events of this source and action beyond the journal's queue. */
  count: z.number().int().optional(),
  /** Summary events only: a few of those events' nodes, as "upstream/node". */
  sample: z.array(z.string()).optional(),
});

const configEvent = z.object({
  id: z.string(),
  type: z.literal("config"),
  time: z.string(),
  token: z.string(),
  revision: z.int(),
  changes: z.array(configChangeSchema),
  /** A rollback: the version it left and the version whose config it restored. */
  rollback: z.object({ from: z.int(), to: z.int(), reason: z.string().optional() }).optional(),
});

/**
 * The journals, newest first: by default the heal journal (what the self-healing chain did, and
 * why, the answer it always gave); with `type=config`, the config writes and who made them.
 */
export const eventsRoutes: FastifyPluginAsyncZod<EventsRoutesOptions> = async (
  app,
  { journal, audit },
) => {
  app.get(
    "/v1/events",
    {
      schema: {
        tags: ["status"],
        summary:
          "Heal actions journaled (quarantine, evict, readmit, remediation, expiry), or with type=config the config writes",
        querystring: eventsQuery,
        response: {
          200: z.object({ items: z.union([z.array(healEvent), z.array(configEvent)]) }),
          400: errorResponse,
          401: errorResponse,
          503: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const { type, limit, upstream, since } = request.query;
      try {
        if (type === "config") {
          if (audit === undefined) {
            return sendError(
              reply,
              clawgateError(
                "CLAWGATE_ENDPOINT_NOT_FOUND",
                "this control plane keeps no config audit",
              ),
            );
          }
          return { items: await audit.list({ limit, since }) };
        }
        return { items: await journal.list({ limit, upstream, since }) };
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        return sendError(
          reply,
          clawgateError("CLAWGATE_STORE_UNAVAILABLE", `config store failed: ${reason}`),
        );
      }
    },
  );
};
