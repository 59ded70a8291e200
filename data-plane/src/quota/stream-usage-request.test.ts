import { describe, expect, it } from "vitest";
import {
  injectStreamUsage,
  STREAM_USAGE_BODY_LIMIT,
  streamUsageCandidate,
  streamUsageScanCandidate,
} from "./stream-usage-request.js";

const rewrite = (body: string) => {
  const result = injectStreamUsage(Buffer.from(body));
  return result?.toString();
};

describe("injectStreamUsage", () => {
  it("adds include_usage in front of a streaming request's own bytes, big numbers kept", () => {
    const body = '{"model":"m","stream":true,"seed":12345678901234567890}';
    const result = rewrite(body);
    expect(result).toBe(
      '{"stream_options":{"include_usage":true},"model":"m","stream":true,"seed":12345678901234567890}',
    );
  });

  it("merges into stream_options the client sent without include_usage", () => {
    const result = rewrite('{"stream":true,"stream_options":{"include_obfuscation":false}}');
    expect(JSON.parse(result!)).toEqual({
      stream: true,
      stream_options: { include_obfuscation: false, include_usage: true },
    });
  });

  it("reads a body that starts with a UTF-8 byte order mark, and keeps the mark", () => {
    const result = injectStreamUsage(Buffer.from('\ufeff{"stream":true}'));
    expect(result?.toString()).toBe(
      '\ufeff{"stream_options":{"include_usage":true},"stream":true}',
    );
  });

  // Python's json takes NaN and Infinity, so such a body streams from a FastAPI upstream.
  it.each([
    ['{"stream":true,"x":NaN}', '{"stream":true,"x":NaN,"stream_options":{"include_usage":true}}'],
    [
      '\ufeff{"x":-Infinity, "stream":true }',
      '\ufeff{"x":-Infinity, "stream":true ,"stream_options":{"include_usage":true}}',
    ],
    [
      '{"stream":true,"stream_options":{"include_obfuscation":false},"x":NaN}',
      '{"stream":true,"stream_options":{"include_obfuscation":false},"x":NaN,"stream_options":{"include_obfuscation":false,"include_usage":true}}',
    ],
    [
      '{"stream":true,"stream_options":{"x":NaN}}',
      '{"stream":true,"stream_options":{"x":NaN},"stream_options":{"include_usage":true}}',
    ],
  ])(
    "adds include_usage in front of the closing brace of %s, which JSON.parse refuses",
    (body, expected) => {
      expect(rewrite(body)).toBe(expected);
    },
  );

  it.each([
    ["a body JSON.parse refuses that does not stream", '{"stream":false,"x":NaN}'],
    [
      "the client asked for usage itself",
      '{"stream":true,"stream_options":{"include_usage":true}}',
    ],
    ["a request that does not stream", '{"model":"m","stream":false}'],
    ["a request without stream", '{"model":"m"}'],
    ["a body that is not JSON", '{"stream":true'],
    ["a JSON array", "[1,2]"],
    ["stream_options that is not an object", '{"stream":true,"stream_options":"x"}'],
  ])("leaves alone %s", (_what, body) => {
    expect(rewrite(body)).toBeUndefined();
  });
});

describe("streamUsageCandidate", () => {
  it.each([
    [{ "content-type": "application/json", "content-length": "20" }, true],
    [{ "content-type": "application/json; charset=utf-8", "content-length": "20" }, true],
    // Upstreams that read any body as JSON (FastAPI without or with a +json type, llama.cpp):
    // the bytes decide, not the label.
    [{ "content-type": "text/plain", "content-length": "20" }, true],
    [{ "content-type": "application/vnd.api+json", "content-length": "20" }, true],
    // Of unknown length: read as it arrives, and rewritten if it ends within the limit.
    [{ "content-type": "application/json", "transfer-encoding": "chunked" }, true],
    [{ "content-type": "text/plain", "transfer-encoding": "chunked" }, true],
    [
      { "content-type": "application/json", "content-length": String(STREAM_USAGE_BODY_LIMIT + 1) },
      false,
    ],
    [{ "content-length": "20" }, true],
    [{ "content-length": "0" }, false],
  ])("reads %o: %s", (headers, expected) => {
    expect(streamUsageCandidate(headers)).toBe(expected);
  });
});

describe("streamUsageScanCandidate", () => {
  const over = String(STREAM_USAGE_BODY_LIMIT + 1);
  it.each([
    [{ "content-type": "application/json", "content-length": over }, true],
    [{ "content-type": "application/json; charset=utf-8", "content-length": over }, true],
    // Within the limit: read whole instead (streamUsageCandidate).
    [
      { "content-type": "application/json", "content-length": String(STREAM_USAGE_BODY_LIMIT) },
      false,
    ],
    [{ "content-type": "text/plain", "content-length": over }, true],
    [{ "content-length": over }, true],
    // Of unknown length: read first, handed to the scan once past the limit (request-body.ts).
    [{ "content-type": "application/json", "transfer-encoding": "chunked" }, false],
  ])("scans %o: %s", (headers, expected) => {
    expect(streamUsageScanCandidate(headers)).toBe(expected);
  });
});
