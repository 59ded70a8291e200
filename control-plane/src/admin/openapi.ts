import { RESOURCE_KINDS, resourceName, resourceSchemas } from "@clawgate/proto";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { FastifyInstance } from "fastify";
import {
  createJsonSchemaTransform,
  createJsonSchemaTransformObject,
} from "fastify-type-provider-zod";
import { z } from "zod";
import { roleNeeded } from "../auth/route-roles.js";
import { applyBody, errorResponse } from "./api-schemas.js";
import { APPLY_MAX_RESOURCES } from "./apply-limits.js";
import { singularKind } from "./kind-name.js";
import { DOCS_PREFIX, isPublicRoute } from "./public-routes.js";

/**
 * The resource specs as named components, so every operation that takes or returns one (PUT,
 * GET, POST /v1/apply) points at the same schema in the document instead of a copy of it.
 */
const components = z.registry<{ id: string }>();
const COMPONENT_IDS = {
  upstreams: "Upstream",
  routes: "Route",
  breakers: "Breaker",
  tenants: "Tenant",
};
for (const kind of RESOURCE_KINDS)
  components.add(resourceSchemas[kind], { id: COMPONENT_IDS[kind] });

/**
 * POST /v1/apply as the document shows it: each item's spec is the schema of its kind. The
 * route itself takes `spec` as any value and validates it per kind in the config service,
 * which names each bad field by resource; this shape only describes what it accepts.
 */
const applyItems = RESOURCE_KINDS.map((kind) =>
  z.strictObject({
    kind: z.enum([kind, singularKind(kind)]).describe("Plural or singular, in any case"),
    name: resourceName,
    spec: resourceSchemas[kind],
  }),
);
const documentedApplyBody = applyBody.extend({
  resources: z
    .array(z.union(applyItems as [(typeof applyItems)[0], ...typeof applyItems]))
    .max(APPLY_MAX_RESOURCES),
});

/**
 * Serves the Swagger UI at /docs and the OpenAPI document at /docs/json. When secured, every
 * operation but the public ones is documented as needing it and answering 401 without it.
 */
export async function registerOpenApi(
  app: FastifyInstance,
  options: { secured: boolean },
): Promise<void> {
  const { secured } = options;
  const toJsonSchema = createJsonSchemaTransform({
    schemaRegistry: components,
    skipList: [
      DOCS_PREFIX,
      `${DOCS_PREFIX}/`,
      `${DOCS_PREFIX}/json`,
      `${DOCS_PREFIX}/yaml`,
      `${DOCS_PREFIX}/*`,
      `${DOCS_PREFIX}/static/*`,
      `${DOCS_PREFIX}/initOAuth`,
      `${DOCS_PREFIX}/uiConfig`,
    ],
  });
  await app.register(fastifySwagger, {
    openapi: {
      info: {
        title: "Clawgate admin API",
        description: "Config resources, snapshot status and data-plane fleet of the control plane",
        version: "1",
      },
      components: {
        securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
      },
      security: secured ? [{ bearer: [] }] : [],
    },
    // Documentation only: the routes keep validating and answering as declared.
    transform: (input) => {
      const schema: Record<string, unknown> = { ...(input.schema ?? {}) };
      if (input.url === "/v1/apply") schema.body = documentedApplyBody;
      if (isPublicRoute(input.url)) {
        schema.security = [];
      } else if (secured) {
        // The bearer and role checks are a hook, not part of any route's schema, so their 401
        // and 403 are added here; the description names the role the route needs.
        const { method } = input.route;
        const role = roleNeeded(String(Array.isArray(method) ? method[0] : method), input.url);
        schema.response = {
          401: errorResponse,
          403: errorResponse,
          ...(schema.response as object | undefined),
        };
        schema.description = [schema.description, `Needs role ${role}.`].filter(Boolean).join(" ");
      }
      return toJsonSchema({ ...input, schema } as Parameters<typeof toJsonSchema>[0]);
    },
    transformObject: createJsonSchemaTransformObject({ schemaRegistry: components }),
  });
  await app.register(fastifySwaggerUi, { routePrefix: DOCS_PREFIX });
}
