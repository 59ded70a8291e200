import { resourceName } from "@clawgate/proto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import { z } from "zod";
import { ROLES } from "../auth/roles.js";
import type { TokenStore } from "../auth/token-store.js";
import { errorResponse } from "./api-schemas.js";
import { type AuditSink, auditOperations } from "./audit-write.js";
import { sendError } from "./errors.js";

export interface TokenRoutesOptions {
  tokens: TokenStore;
  /** Journals each create and revoke with the name of the token that made it; default none. */
  audit?: AuditSink;
}

const createBody = z.strictObject({
  /** Names the token in GET /v1/tokens, logs and the audit journal. */
  name: resourceName,
  role: z.enum(ROLES),
  /** Upstreams a registrar may register nodes in; required for registrar, refused otherwise. */
  upstreams: z.array(resourceName).max(1_000).default([]),
});

const tokenView = z.object({
  name: z.string(),
  role: z.enum(ROLES),
  upstreams: z.array(z.string()),
  createdAt: z.string(),
  createdBy: z.string().optional(),
});

const errors = {
  400: errorResponse,
  401: errorResponse,
  403: errorResponse,
  404: errorResponse,
  409: errorResponse,
  503: errorResponse,
};
const tags = ["tokens"];

/** Named tokens with roles: create (the secret is answered once), list, revoke. Admin only. */
export const tokenRoutes: FastifyPluginAsyncZod<TokenRoutesOptions> = async (
  app,
  { tokens, audit },
) => {
  app.post(
    "/v1/tokens",
    {
      schema: {
        tags,
        summary:
          "Create a named token with a role; the answer is the only time its secret is shown",
        body: createBody,
        response: {
          201: z.object({ name: z.string(), role: z.enum(ROLES), token: z.string() }),
          ...errors,
        },
      },
    },
    async (request, reply) => {
      const { name, role, upstreams } = request.body;
      const result = await tokens.create(
        name,
        role,
        upstreams,
        request.caller?.name,
        auditOperations(audit, request, [{ kind: "tokens", name, action: "created" }]),
      );
      if (!result.ok) return sendError(reply, result.error);
      reply.code(201).header("cache-control", "no-store");
      return { name, role, token: result.token };
    },
  );

  app.get(
    "/v1/tokens",
    {
      schema: {
        tags,
        summary: "List the named tokens: names, roles, upstreams; never a secret nor its hash",
        response: { 200: z.object({ items: z.array(tokenView) }), ...errors },
      },
    },
    async () => ({ items: tokens.list() }),
  );

  app.delete(
    "/v1/tokens/:name",
    {
      schema: {
        tags,
        summary: "Revoke a token; requests carrying it get 401 from then on",
        params: z.object({ name: resourceName }),
        response: { 200: z.object({ name: z.string(), revision: z.int() }), ...errors },
      },
    },
    async (request, reply) => {
      const { name } = request.params;
      const result = await tokens.revoke(
        name,
        auditOperations(audit, request, [{ kind: "tokens", name, action: "deleted" }]),
      );
      if (!result.ok) return sendError(reply, result.error);
      return { name, revision: result.revision };
    },
  );
};
