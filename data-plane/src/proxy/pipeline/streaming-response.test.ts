import { describe, expect, it } from "vitest";
import { isStreamingResponse } from "./streaming-response.js";

describe("isStreamingResponse", () => {
  it.each([
    [200, { "content-type": "text/event-stream" }, true],
    // Media types are case-insensitive (RFC 9110 section 8.3.1), parameters may follow.
    [200, { "content-type": "Text/Event-Stream; charset=utf-8" }, true],
    [200, { "content-type": "application/json", "content-length": "12" }, false],
    [200, { "transfer-encoding": "chunked" }, true],
    [200, { "transfer-encoding": "chunked", "content-length": "5" }, false],
    [204, { "content-type": "text/event-stream" }, false],
    [304, { "transfer-encoding": "chunked" }, false],
  ])("status %i with %o: %s", (status, headers, expected) => {
    expect(isStreamingResponse(status, headers)).toBe(expected);
  });
});
