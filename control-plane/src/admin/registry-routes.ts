import { resourceName } from "@clawgate/proto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import type { NodeRegistry } from "../registry/node-registry.js";
import { registrationSchema } from "../registry/registered-node.js";
import { errorResponse, nameParams } from "./api-schemas.js";
import { type AuditSink, auditOperations } from "./audit-write.js";
import { sendError } from "./errors.js";

export interface RegistryRoutesOptions {
  registry: NodeRegistry;
  /** Journals registrations and deregistrations (not renewals) with the token's name. */
  audit?: AuditSink;
}

const nodeParams = z.object({ name: resourceName, id: resourceName });

const registrationResponse = z.object({
  upstream: z.string(),
  id: z.string(),
  address: z.string(),
  weight: z.int(),
  ttlSeconds: z.int(),
  registeredAt: z.string(),
  /** created, updated (address or weight changed) or renewed (lease refreshed only). */
  action: z.enum(["created", "updated", "renewed"]),
  expiresInSeconds: z.int(),
  revision: z.int(),
});

const listedNode = z.object({
  address: z.string(),
  weight: z.int(),
  source: z.enum(["config", "registry"]),
  id: z.string().optional(),
  active: z.boolean(),
  ttlSeconds: z.int().optional(),
  expiresInSeconds: z.int().nullable().optional(),
  registeredAt: z.string().optional(),
});

const errors = {
  400: errorResponse,
  401: errorResponse,
  404: errorResponse,
  409: errorResponse,
  500: errorResponse,
  503: errorResponse,
};
const tags = ["registry"];

/**
 * The node registry: nodes register and renew themselves with PUT, leave with DELETE, and
 * lapse when they stop renewing. GET lists every node of the upstream with its source.
 */
export const registryRoutes: FastifyPluginAsyncZod<RegistryRoutesOptions> = async (
  app,
  { registry, audit },
) => {
  app.get(
    "/v1/upstreams/:name/nodes",
    {
      schema: {
        tags,
        summary: "List an upstream's nodes, from its document and from the registry",
        params: nameParams,
        response: {
          200: z.object({ upstream: z.string(), revision: z.int(), items: z.array(listedNode) }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const result = await registry.list(request.params.name);
      if (!result.ok) return sendError(reply, result.error);
      return { upstream: request.params.name, revision: result.revision, items: result.nodes };
    },
  );

  app.put(
    "/v1/upstreams/:name/nodes/:id",
    {
      schema: {
        tags,
        summary: "Register a node under a TTL lease, or renew its registration",
        params: nodeParams,
        body: registrationSchema,
        response: { 200: registrationResponse, 201: registrationResponse, ...errors },
      },
    },
    async (request, reply) => {
      const { name, id } = request.params;
      // A renewal writes nothing, so only a registration or a change of address or weight is
      // journaled: renewals come every few seconds per node and would bury the rest.
      const result = await registry.register(name, id, request.body, (action) =>
        auditOperations(audit, request, [{ kind: "nodes", name: `${name}/${id}`, action }]),
      );
      if (!result.ok) return sendError(reply, result.error);
      const { node } = result;
      if (result.action === "created") {
        reply.code(201).header("location", `/v1/upstreams/${name}/nodes`);
      }
      return {
        upstream: name,
        id,
        address: node.address,
        weight: node.weight,
        ttlSeconds: node.ttlSeconds,
        registeredAt: node.registeredAt,
        action: result.action,
        expiresInSeconds: result.expiresInSeconds,
        revision: result.revision,
      };
    },
  );

  app.delete(
    "/v1/upstreams/:name/nodes/:id",
    {
      schema: {
        tags,
        summary: "Deregister a node now",
        params: nodeParams,
        response: {
          200: z.object({ upstream: z.string(), id: z.string(), revision: z.int() }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const { name, id } = request.params;
      const result = await registry.deregister(
        name,
        id,
        auditOperations(audit, request, [
          { kind: "nodes", name: `${name}/${id}`, action: "deleted" },
        ]),
      );
      if (!result.ok) return sendError(reply, result.error);
      return { upstream: name, id, revision: result.revision };
    },
  );
};
