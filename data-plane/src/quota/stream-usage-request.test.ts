import { describe, expect, it } from "vitest";
import {
  injectStreamUsage,
  STREAM_USAGE_BODY_LIMIT,
  streamUsageCandidate,
  streamUsageScanCandidate,
} from "./stream-usage-request.js";

const rewrite = (body: string) => {
  const result = injectStreamUsage(Buffer.from(body))?.body;
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
    const result = injectStreamUsage(Buffer.from('\ufeff{"stream":true}'))?.body;
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
  ])("leaves alone %s", (_what, body) => {
    expect(rewrite(body)).toBeUndefined();
  });
});

describe("injectStreamUsage, read as loosely as an upstream may", () => {
  // pydantic's lax mode (vLLM) and Go's case-insensitive keys read these as streaming.
  it.each([
    '{"stream":1}',
    '{"stream":"yes"}',
    '{"stream":"ON"}',
    '{"Stream":true}',
    '{"STREAM":"t"}',
    '{"model":"m","stream":"\\u0059"}',
  ])("adds include_usage to %s", (body) => {
    expect(JSON.parse(rewrite(body)!).stream_options).toEqual({ include_usage: true });
  });

  it("adds the field last when Go would read another stream_options key than JSON.parse", () => {
    const body = '{"stream":true,"Stream_Options":{"include_usage":false,"x":1}}';
    expect(rewrite(body)).toBe(
      `${body.slice(0, -1)},"stream_options":{"include_usage":true,"x":1}}`,
    );
  });

  it.each(["stream_opt\u0130ons", "stream_opt\u0131ons"])(
    "adds the field last when Go reads %s as stream_options",
    (key) => {
      const body = `{"stream":true,"stream_options":{"x":1},"${key}":{"include_usage":false}}`;
      const result = rewrite(body)!;
      expect(result.endsWith(',"stream_options":{"include_usage":true}}')).toBe(true);
    },
  );

  it("adds the field when the client asked for usage only in a key Go reads", () => {
    const body = '{"stream":true,"Stream_Options":{"include_usage":true}}';
    const result = injectStreamUsage(Buffer.from(body));
    expect(result?.body.toString()).toBe(
      `${body.slice(0, -1)},"stream_options":{"include_usage":true}}`,
    );
    // It may have asked (Go reads its key): the chunk stays the client's.
    expect(result?.stripUsage).toBe(false);
  });
});

describe("injectStreamUsage: whose usage chunk it is", () => {
  const strips = (body: string) => injectStreamUsage(Buffer.from(body))?.stripUsage;

  it("takes the chunk the client did not ask for", () => {
    expect(strips('{"stream":true}')).toBe(true);
    expect(strips('{"stream":true,"stream_options":{"include_usage":false}}')).toBe(true);
    expect(strips('{"stream":true,"stream_options":null}')).toBe(true);
  });

  it.each([
    [
      "include_usage truthy but not true",
      '{"stream":true,"stream_options":{"include_usage":"yes"}}',
    ],
    ["include_usage 1", '{"stream":true,"stream_options":{"include_usage":1}}'],
    [
      "stream_options JSON.parse refuses",
      '{"stream":true,"stream_options":{"include_usage":true,"x":NaN}}',
    ],
    [
      "stream_options too large to keep, in a body JSON.parse refuses",
      `{"stream":true,"stream_options":{"include_usage":true,"x":"${"y".repeat(5000)}"},"z":NaN}`,
    ],
  ])("adds the field but leaves the chunk to a client that may have asked: %s", (_what, body) => {
    const result = injectStreamUsage(Buffer.from(body));
    expect(result?.body.toString()).toContain('"include_usage":true}');
    expect(result?.stripUsage).toBe(false);
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
