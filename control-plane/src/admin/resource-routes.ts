import { RESOURCE_KINDS, type ResourceKind, resourceSchemas } from "@clawgate/proto";
import type { FastifyPluginAsyncZod } from "fastify-type-provider-zod";
import {
  NOTHING_ALLOWED,
  type RemediationAllowlist,
} from "../remediation/remediation-allowlist.js";
import type { ConfigService } from "../resources/config-service.js";
import { type ClawgateError, clawgateError, type Outcome } from "../resources/errors.js";
import { continueToken, parseContinueToken } from "../resources/list-page.js";
import {
  deleteResponse,
  errorResponse,
  ifMatchHeaders,
  ifNoneMatchHeaders,
  listQuery,
  listResponse,
  nameParams,
  notModified,
  resourceResponse,
} from "./api-schemas.js";
import { type AuditSink, auditOperations } from "./audit-write.js";
import { etag, noneMatchHolds, parseIfNoneMatch } from "./entity-tags.js";
import { sendError } from "./errors.js";
import { singularKind } from "./kind-name.js";
import { remediationGuard } from "./remediation-guard.js";
import { readableSpec, responseSpec } from "./tenant-key-redaction.js";

export interface ResourceRoutesOptions {
  config: ConfigService;
  /** Journals each write with its token's name; default none. */
  audit?: AuditSink;
  /** What an upstream's remediation may run; default nothing (remediation writes refused). */
  remediationAllowlist?: RemediationAllowlist;
}

const errors = {
  400: errorResponse,
  401: errorResponse,
  404: errorResponse,
  403: errorResponse,
  409: errorResponse,
  412: errorResponse,
};

/**
 * Reads If-Match as the revision a write must find. "*" and a missing header set no
 * condition; a tag that is not one of our revisions can never match.
 */
export function parseIfMatch(header: string | undefined): Outcome<{ revision?: number }> {
  const value = header?.trim();
  if (value === undefined || value === "" || value === "*") return { ok: true };
  const match = /^(?:W\/)?"?(\d+)"?$/.exec(value);
  if (match?.[1] === undefined) {
    const error: ClawgateError = clawgateError(
      "CLAWGATE_PRECONDITION_FAILED",
      `If-Match ${value} names no revision; send the ETag of the resource`,
    );
    return { ok: false, error };
  }
  return { ok: true, revision: Number(match[1]) };
}

/** GET (list and one), PUT and DELETE for each resource kind under /v1/{kind}. */
export const resourceRoutes: FastifyPluginAsyncZod<ResourceRoutesOptions> = async (
  app,
  { config, audit, remediationAllowlist = NOTHING_ALLOWED },
) => {
  for (const kind of RESOURCE_KINDS) registerKind(app, config, kind, audit, remediationAllowlist);
};

function registerKind(
  app: Parameters<FastifyPluginAsyncZod>[0],
  config: ConfigService,
  kind: ResourceKind,
  audit: AuditSink,
  remediationAllowlist: RemediationAllowlist,
): void {
  const spec = resourceSchemas[kind];
  // What reads answer: a viewer gets a tenant's key hashes redacted (tenant-key-redaction.ts).
  const readSpec = responseSpec(kind);
  const one = singularKind(kind);
  const tags = [kind];

  app.get(
    `/v1/${kind}`,
    {
      schema: {
        tags,
        summary: `List ${kind}, one page at a time`,
        description:
          "Items in name order. When more follow, the body carries `continue` (and " +
          "`remainingItemCount`): ask again with ?continue=<it> for the next page. Each page is " +
          "read as the config is when it is asked for.",
        querystring: listQuery,
        response: { 200: listResponse(readSpec), ...errors },
      },
    },
    async (request, reply) => {
      const { limit } = request.query;
      let after: string | undefined;
      if (request.query.continue !== undefined) {
        const token = parseContinueToken(request.query.continue);
        if (!token.ok) return sendError(reply, token.error);
        after = token.after;
      }
      const result = await config.list(kind, { after, limit });
      if (!result.ok) return sendError(reply, result.error);
      const items = result.items.map(({ name, revision, document }) => ({
        name,
        revision,
        spec: readableSpec(kind, document, request.caller),
      }));
      const last = items.at(-1);
      if (result.remaining === 0 || last === undefined) return { revision: result.revision, items };
      return {
        revision: result.revision,
        items,
        continue: continueToken(last.name),
        remainingItemCount: result.remaining,
      };
    },
  );

  app.get(
    `/v1/${kind}/:name`,
    {
      schema: {
        tags,
        summary: `Read one ${one}`,
        params: nameParams,
        headers: ifNoneMatchHeaders,
        response: { 200: resourceResponse(readSpec), 304: notModified, ...errors },
      },
    },
    async (request, reply) => {
      const result = await config.get(kind, request.params.name);
      if (!result.ok) return sendError(reply, result.error);
      const { name, revision, document } = result.resource;
      reply.header("etag", etag(revision));
      // RFC 9110 section 13.1.2: a GET whose If-None-Match names the current tag gets 304.
      const noneMatch = parseIfNoneMatch(request.headers["if-none-match"]);
      if (noneMatch !== undefined && noneMatchHolds(noneMatch, revision)) {
        return reply.code(304).send(undefined);
      }
      return { name, revision, spec: readableSpec(kind, document, request.caller) };
    },
  );

  app.put(
    `/v1/${kind}/:name`,
    {
      schema: {
        tags,
        summary: `Create or replace one ${one}`,
        params: nameParams,
        headers: ifMatchHeaders,
        body: spec,
        response: { 200: resourceResponse(spec), 201: resourceResponse(spec), ...errors },
      },
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers["if-match"]);
      if (!ifMatch.ok) return sendError(reply, ifMatch.error);
      const { name } = request.params;
      const ifNoneMatch = parseIfNoneMatch(request.headers["if-none-match"]);
      const result = await config.apply(
        [{ kind, name, document: request.body, ifMatch: ifMatch.revision, ifNoneMatch }],
        {
          alsoWrite: (results, writes) => auditOperations(audit, request, results, writes),
          vet: remediationGuard(request.caller, remediationAllowlist),
        },
      );
      if (!result.ok) return sendError(reply, result.error);
      const applied = result.results[0];
      const revision = applied?.revision ?? result.revision;
      reply.header("etag", etag(revision));
      if (applied?.action === "created") {
        reply.code(201).header("location", `/v1/${kind}/${name}`);
      }
      // The validator already parsed and defaulted the body: it is what was stored.
      return { name, revision, spec: request.body };
    },
  );

  app.delete(
    `/v1/${kind}/:name`,
    {
      schema: {
        tags,
        summary: `Delete one ${one}`,
        params: nameParams,
        headers: ifMatchHeaders,
        response: { 200: deleteResponse, ...errors },
      },
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers["if-match"]);
      if (!ifMatch.ok) return sendError(reply, ifMatch.error);
      const { name } = request.params;
      const ifNoneMatch = parseIfNoneMatch(request.headers["if-none-match"]);
      const result = await config.apply(
        [{ kind, name, delete: true, ifMatch: ifMatch.revision, ifNoneMatch }],
        {
          alsoWrite: (results, writes) => auditOperations(audit, request, results, writes),
          vet: remediationGuard(request.caller, remediationAllowlist),
        },
      );
      if (!result.ok) return sendError(reply, result.error);
      return { name, revision: result.revision };
    },
  );
}
