import zlib from "node:zlib";
import { describe, expect, it } from "vitest";
import { usageReaderFor } from "./encoded-usage-reader.js";

const json = JSON.stringify({
  choices: [{ message: { content: "hello" } }],
  usage: { prompt_tokens: 12, completion_tokens: 30, total_tokens: 42 },
});
const sse = [
  'data: {"choices":[{"delta":{"content":"hel"}}]}',
  'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}',
  "data: [DONE]",
  "",
].join("\n\n");

/** Feeds `body` to a reader for `headers` in chunks of `size`; resolves with its tokens. */
function read(headers: Record<string, string>, body: Buffer, size = 5): Promise<number> {
  const reader = usageReaderFor(headers);
  if (reader === undefined) throw new Error("no reader");
  for (let i = 0; i < body.length; i += size) reader.push(body.subarray(i, i + size));
  return new Promise((resolve) => reader.finish(0, resolve));
}

describe("usageReaderFor", () => {
  it.each([
    ["gzip", zlib.gzipSync],
    ["x-gzip", zlib.gzipSync],
    ["deflate", zlib.deflateSync],
    ["br", zlib.brotliCompressSync],
    ["GZIP ", zlib.gzipSync],
  ] as const)(
    "reads the usage of a JSON body sent with Content-Encoding %s",
    async (coding, encode) => {
      const body = encode(Buffer.from(json));
      expect(
        await read({ "content-type": "application/json", "content-encoding": coding }, body),
      ).toBe(42);
    },
  );

  it("reads the usage of a gzip SSE stream", async () => {
    const body = zlib.gzipSync(Buffer.from(sse));
    expect(
      await read({ "content-type": "text/event-stream", "content-encoding": "gzip" }, body, 3),
    ).toBe(11);
  });

  it("reads a plain body at once, as before", async () => {
    expect(await read({ "content-type": "application/json" }, Buffer.from(json))).toBe(42);
    expect(
      await read(
        { "content-type": "application/json", "content-encoding": "identity" },
        Buffer.from(json),
      ),
    ).toBe(42);
  });

  it("debits a cut gzip stream with what its decoded part reported", async () => {
    const whole = zlib.gzipSync(Buffer.from(sse));
    // Without its trailer (and the last bytes of data): as a client abort leaves it.
    const cut = whole.subarray(0, whole.length - 8);
    expect(
      await read({ "content-type": "text/event-stream", "content-encoding": "gzip" }, cut),
    ).toBe(11);
  });

  it.each(["zstd", "gzip, br", "compress"])(
    "charges one token per byte for Content-Encoding %s",
    async (coding) => {
      const body = Buffer.from("a".repeat(300));
      expect(
        await read({ "content-type": "application/json", "content-encoding": coding }, body),
      ).toBe(300);
    },
  );

  it("charges one token per byte for gzip that does not decode", async () => {
    const body = Buffer.from(`not gzip ${"x".repeat(200)}`);
    expect(
      await read({ "content-type": "application/json", "content-encoding": "gzip" }, body),
    ).toBe(body.length);
  });

  it("gives up decoding a bomb past its bound and charges what was received", async () => {
    // One long string: the scanner crosses it fast, so the bound is what stops the decoding.
    const bomb = zlib.gzipSync(
      Buffer.concat([Buffer.from('{"a":"'), Buffer.alloc(65 * 1024 * 1024, 0x78)]),
    );
    const tokens = await read(
      { "content-type": "application/json", "content-encoding": "gzip" },
      bomb,
      16384,
    );
    expect(tokens).toBe(bomb.length);
  });

  it("has no reader for a body that carries no usage", () => {
    expect(
      usageReaderFor({ "content-type": "text/html", "content-encoding": "gzip" }),
    ).toBeUndefined();
  });
});
