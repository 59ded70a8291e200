import type { Policy, PolicyAnswer, PolicyFactory, PolicyRequest } from "./policy.js";

const UNSUPPORTED: PolicyAnswer = Object.freeze({
  kind: "error",
  code: "CLAWGATE_UNSUPPORTED_MEDIA_TYPE",
});

/**
 * route.usage.injectStreamUsage: a request body with a Content-Encoding other than `identity`
 * is 415 before a byte of it is read. An upstream that decompresses request bodies reads the
 * JSON inside, a stream among it, while the gateway sees compressed bytes it cannot add
 * include_usage to: passed on, such a stream would cost its tenant nothing. Fails closed on
 * any coding, known or not, and on a list with one (`gzip, identity`).
 */
export const contentEncoding: PolicyFactory = {
  name: "content-encoding",
  compile({ route }): Policy | undefined {
    if (route.usage?.injectStreamUsage !== true) return undefined;
    return {
      name: "content-encoding",
      onRequest(request: PolicyRequest): PolicyAnswer | undefined {
        const headers = request.req.headers;
        const coding = headers["content-encoding"];
        if (coding === undefined || !encodedBeyondIdentity(coding)) return undefined;
        // Only a body can be encoded (RFC 9112 section 6.3: one exists when it is framed).
        const length = headers["content-length"];
        const hasBody = headers["transfer-encoding"] !== undefined || Number(length) > 0;
        return hasBody ? UNSUPPORTED : undefined;
      },
    };
  },
};

/** Whether a Content-Encoding list names a coding other than `identity` (any case). */
function encodedBeyondIdentity(value: string): boolean {
  for (const coding of value.split(",")) {
    const name = coding.trim();
    if (name !== "" && name.toLowerCase() !== "identity") return true;
  }
  return false;
}
