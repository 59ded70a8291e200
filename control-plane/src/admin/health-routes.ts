import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { FleetHealth } from "../health/fleet-health.js";
import { NODE_HEALTH_STATES } from "../health/node-verdict.js";
import { HEAL_OUTCOMES } from "../journal/heal-event.js";
import type { RemediationRunner } from "../remediation/remediation-runner.js";
import { BREAKER_STATES } from "../replicas/data-plane-record.js";
import type { FleetBreakers } from "../replicas/fleet-breakers.js";
import type { ConfigService } from "../resources/config-service.js";
import { errorResponse, nameParams } from "./api-schemas.js";
import { sendError } from "./errors.js";

export interface HealthRoutesOptions {
  health: Pick<FleetHealth, "upstream">;
  /** Tells a known upstream from an unknown one, and lists its configured nodes. */
  config: Pick<ConfigService, "get">;
  /** Adds each node's remediation episode; default none. */
  remediation?: Pick<RemediationRunner, "status">;
  /** Adds the data planes' breakers of the upstream that are not closed; default none. */
  breakers?: Pick<FleetBreakers, "upstream">;
}

const nodeHealth = z.object({
  address: z.string(),
  healthy: z.int(),
  quarantined: z.int(),
  evicted: z.int(),
  /** Data planes reporting the node. */
  total: z.int(),
  majority: z.enum([...NODE_HEALTH_STATES, "split", "unreported"]),
  reports: z.array(
    z.object({
      dataPlane: z.string(),
      state: z.enum(NODE_HEALTH_STATES),
      evidence: z.string(),
      changedAt: z.string(),
    }),
  ),
  remediation: z
    .object({
      attempts: z.int(),
      running: z.boolean(),
      lastOutcome: z.enum(HEAL_OUTCOMES).optional(),
      nextAttemptAt: z.string().optional(),
    })
    .optional(),
});

const upstreamHealth = z.object({
  upstream: z.string(),
  /** Data planes reporting on at least one node of the upstream. */
  dataPlanes: z.int(),
  nodes: z.array(nodeHealth),
  /** Each data plane's breaker of the upstream that is not closed (closed everywhere else). */
  breakers: z.array(
    z.object({
      dataPlane: z.string(),
      state: z.enum(BREAKER_STATES),
      since: z.string(),
      cooldownUntil: z.string().optional(),
    }),
  ),
});

/** The fleet's view of an upstream's nodes: how many data planes see each one in each state. */
export const healthRoutes: FastifyPluginAsyncZod<HealthRoutesOptions> = async (app, options) => {
  app.get(
    "/v1/upstreams/:name/health",
    {
      schema: {
        tags: ["status"],
        summary: "Node health of an upstream as the data planes report it, with majority verdicts",
        params: nameParams,
        response: {
          200: upstreamHealth,
          400: errorResponse,
          401: errorResponse,
          404: errorResponse,
          500: errorResponse,
          503: errorResponse,
        },
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const found = await options.config.get("upstreams", name);
      if (!found.ok) return sendError(reply, found.error);
      const reported = options.health.upstream(name);
      const dataPlanes = new Set(reported.flatMap((node) => node.reports.map((r) => r.dataPlane)));
      const nodes: z.infer<typeof nodeHealth>[] = reported.map((node) => {
        const { upstream: _upstream, ...rest } = node;
        const remediation = options.remediation?.status(name, node.address);
        return remediation === undefined ? rest : { ...rest, remediation };
      });
      // Configured nodes no data plane reports yet still show, so nothing is silently missing.
      const seen = new Set(nodes.map((node) => node.address));
      for (const { address } of found.resource.document.nodes) {
        if (seen.has(address)) continue;
        nodes.push({
          address,
          healthy: 0,
          quarantined: 0,
          evicted: 0,
          total: 0,
          majority: "unreported",
          reports: [],
        });
      }
      nodes.sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
      const breakers = options.breakers?.upstream(name) ?? [];
      return { upstream: name, dataPlanes: dataPlanes.size, nodes, breakers };
    },
  );
};
