import { resourceSchemas } from "@clawgate/proto";
import type { FastifyError, FastifyInstance, FastifyReply, FastifySchemaCompiler } from "fastify";
import type { $ZodType } from "zod/v4/core";
import { safeParse } from "zod/v4/core";
import {
  type ClawgateError,
  clawgateError,
  type ErrorCode,
  fieldProblems,
} from "../resources/errors.js";
import { parseKind } from "./kind-name.js";

/** The one error body the admin API answers with. */
export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: unknown };
}

export function errorBody(error: ClawgateError): ErrorBody {
  const body: ErrorBody = { error: { code: error.code, message: error.message } };
  if (error.details !== undefined) body.error.details = error.details;
  return body;
}

export function sendError(reply: FastifyReply, error: ClawgateError): FastifyReply {
  return reply.code(error.status).type("application/json").send(errorBody(error));
}

/** Carries a catalog error through fastify's error path (validators, hooks). */
export class AdminHttpError extends Error {
  readonly code: ErrorCode;
  readonly statusCode: number;
  readonly clawgate: ClawgateError;

  constructor(error: ClawgateError) {
    super(error.message);
    this.code = error.code;
    this.statusCode = error.status;
    this.clawgate = error;
  }
}

const resourceSchemaSet = new Set<unknown>(Object.values(resourceSchemas));

/**
 * fastify-type-provider-zod's validator, but failing with catalog errors whose details name
 * each bad field by its dotted path, the same shape the config service returns.
 */
export const validatorCompiler: FastifySchemaCompiler<$ZodType> = ({ schema, httpPart }) => {
  const code: ErrorCode = resourceSchemaSet.has(schema)
    ? "CLAWGATE_INVALID_RESOURCE"
    : httpPart === "params"
      ? "CLAWGATE_INVALID_NAME"
      : "CLAWGATE_INVALID_REQUEST";
  return (data) => {
    const result = safeParse(schema, data);
    if (result.success) return { value: result.data };
    const problems = fieldProblems(result.error.issues);
    const summary = problems
      .map((problem) => (problem.path ? `${problem.path}: ${problem.message}` : problem.message))
      .join("; ");
    return {
      error: new AdminHttpError(
        clawgateError(code, `${httpPart ?? "request"} is invalid: ${summary}`, problems),
      ),
    };
  };
};

const BODY_ERRORS: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_MEDIA_TYPE: "CLAWGATE_UNSUPPORTED_MEDIA_TYPE",
  FST_ERR_CTP_BODY_TOO_LARGE: "CLAWGATE_PAYLOAD_TOO_LARGE",
  FST_ERR_CTP_EMPTY_JSON_BODY: "CLAWGATE_INVALID_REQUEST",
  FST_ERR_CTP_INVALID_JSON_BODY: "CLAWGATE_INVALID_REQUEST",
};

/** Routes every failure, including fastify's own, to `{ error: { code, message, details } }`. */
export function installErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((err: FastifyError, request, reply) => {
    if (err instanceof AdminHttpError) return sendError(reply, err.clawgate);
    const bodyCode = BODY_ERRORS[err.code];
    if (bodyCode === "CLAWGATE_PAYLOAD_TOO_LARGE") {
      // fastify's own text gives no number; say which limit, so the client can split its request.
      const limit = request.routeOptions.bodyLimit;
      return sendError(
        reply,
        clawgateError(
          bodyCode,
          `request body is larger than the ${limit}-byte limit of ${request.method} ${request.routeOptions.url ?? request.url.split("?")[0]}`,
        ),
      );
    }
    if (bodyCode !== undefined) return sendError(reply, clawgateError(bodyCode, err.message));
    // JSON syntax errors from the body parser arrive as plain errors with status 400.
    if (err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 500) {
      const message =
        err instanceof SyntaxError ? `body is not valid JSON: ${err.message}` : err.message;
      return sendError(reply, clawgateError("CLAWGATE_INVALID_REQUEST", message));
    }
    request.log.error({ err }, "admin request failed");
    return sendError(reply, clawgateError("CLAWGATE_INTERNAL"));
  });

  // First segments under /v1 that are endpoints, not kinds (apply, snapshot, events, ...),
  // collected as routes register so a wrong method or sub-path there is not an "unknown kind".
  const endpoints = new Set<string>();
  app.addHook("onRoute", (route) => {
    const [, version, segment] = route.url.split("/");
    if (version === "v1" && segment && !segment.startsWith(":")) endpoints.add(segment);
  });

  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split("?")[0] ?? "";
    const [, version, kind] = path.split("/");
    if (version === "v1" && kind && !endpoints.has(kind) && parseKind(kind) === undefined) {
      return sendError(
        reply,
        clawgateError(
          "CLAWGATE_UNKNOWN_KIND",
          `unknown kind ${kind}; use upstreams, routes, breakers or tenants`,
        ),
      );
    }
    return sendError(
      reply,
      clawgateError("CLAWGATE_ENDPOINT_NOT_FOUND", `no endpoint ${request.method} ${path}`),
    );
  });
}
