import { describe, expect, it } from "vitest";
import { errorBody } from "./error-catalog.js";
import { classifyUpstreamError, errorCodeForFailure } from "./failure-kind.js";

function coded(code: string): Error {
  return Object.assign(new Error("x"), { code });
}

describe("classifyUpstreamError", () => {
  it.each([
    ["ECONNREFUSED", "refused", "CLAWGATE_UPSTREAM_CONNECT_FAILED"],
    ["UND_ERR_CONNECT_TIMEOUT", "connect_timeout", "CLAWGATE_UPSTREAM_CONNECT_FAILED"],
    ["ENOTFOUND", "dns", "CLAWGATE_UPSTREAM_CONNECT_FAILED"],
    ["UND_ERR_HEADERS_TIMEOUT", "header_timeout", "CLAWGATE_UPSTREAM_TIMEOUT"],
    ["UND_ERR_BODY_TIMEOUT", "body_timeout", "CLAWGATE_UPSTREAM_TIMEOUT"],
    ["UND_ERR_SOCKET", "reset", "CLAWGATE_UPSTREAM_RESET"],
    ["ECONNRESET", "reset", "CLAWGATE_UPSTREAM_RESET"],
    ["HPE_INVALID_CHUNK_SIZE", "protocol", "CLAWGATE_UPSTREAM_RESET"],
    ["UND_ERR_INVALID_ARG", "bad_request", "CLAWGATE_BAD_REQUEST"],
    ["constructor", "other", "CLAWGATE_UPSTREAM_RESET"],
  ])("%s is %s", (code, kind, errorCode) => {
    const classified = classifyUpstreamError(coded(code));
    expect(classified).toBe(kind);
    expect(errorCodeForFailure(classified)).toBe(errorCode);
  });

  it("looks inside AggregateError from happy-eyeballs connects", () => {
    expect(classifyUpstreamError(new AggregateError([coded("ECONNREFUSED")]))).toBe("refused");
  });

  it("classifies values without a code as other", () => {
    expect(classifyUpstreamError(new Error("boom"))).toBe("other");
    expect(classifyUpstreamError("boom")).toBe("other");
  });
});

describe("errorBody", () => {
  it("is the catalog JSON shape", () => {
    expect(JSON.parse(errorBody("CLAWGATE_UPSTREAM_TIMEOUT", "r-1"))).toEqual({
      error: {
        code: "CLAWGATE_UPSTREAM_TIMEOUT",
        message: "The upstream service did not answer in time.",
        requestId: "r-1",
      },
    });
  });
});
