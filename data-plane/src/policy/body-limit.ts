import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

const TOO_LARGE: PolicyAnswer = Object.freeze({
  kind: "error",
  code: "CLAWGATE_PAYLOAD_TOO_LARGE",
});

/**
 * route.maxBodyBytes, for a declared body: a Content-Length above it is 413 before a byte is
 * read. A chunked body has no length to check here; the proxy cuts it as it streams, at the
 * first byte past the limit (limited-body.ts), also with 413.
 */
export const bodyLimit: PolicyFactory = {
  name: "body-limit",
  compile({ route }): Policy | undefined {
    const max = Number(route.maxBodyBytes);
    if (max === 0) return undefined;
    return {
      name: "body-limit",
      onRequest(request: PolicyRequest): PolicyAnswer | undefined {
        const declared = request.req.headers["content-length"];
        return declared !== undefined && Number(declared) > max ? TOO_LARGE : undefined;
      },
    };
  },
};
