import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { includeUsageAtEnd } from "./include-usage-at-end.js";

/** The body cut at the given offsets, as a client's chunks. */
async function* chunksOf(body: Buffer, cuts: number[]): AsyncGenerator<Uint8Array> {
  let from = 0;
  for (const to of [...cuts, body.length]) {
    yield body.subarray(from, to);
    from = to;
  }
}

/** What goes upstream for `body` cut at `cuts`, and what the transform recorded. */
async function transformed(body: Buffer, cuts: number[] = []) {
  const record = { clientBodyBytes: -1, stripStreamUsage: false };
  const out: Buffer[] = [];
  for await (const chunk of includeUsageAtEnd(chunksOf(body, cuts), record)) {
    out.push(Buffer.from(chunk));
  }
  return { sent: Buffer.concat(out).toString(), clientBodyBytes: record.clientBodyBytes };
}

describe("includeUsageAtEnd", () => {
  // [what, body, what a JSON parser upstream reads (undefined: the body goes as it came)]
  const cases: [string, string, unknown][] = [
    [
      "a streaming request",
      '{"model":"m","stream":true}',
      { model: "m", stream: true, stream_options: { include_usage: true } },
    ],
    [
      "a streaming request with whitespace before and after its closing brace",
      '{"stream":true \n}\n',
      { stream: true, stream_options: { include_usage: true } },
    ],
    [
      "stream_options with include_usage false",
      '{"stream":true,"stream_options":{"include_usage":false}}',
      { stream: true, stream_options: { include_usage: true } },
    ],
    [
      "stream_options with other fields",
      '{"stream_options":{"include_obfuscation":false},"stream":true,"n":1}',
      { stream: true, n: 1, stream_options: { include_obfuscation: false, include_usage: true } },
    ],
    [
      "stream_options null",
      '{"stream":true,"stream_options":null}',
      { stream: true, stream_options: { include_usage: true } },
    ],
    [
      'a "stream": true in messages and a top-level one',
      '{"messages":[{"stream":false,"content":"{\\"stream\\": false}"}],"stream":true}',
      {
        messages: [{ stream: false, content: '{"stream": false}' }],
        stream: true,
        stream_options: { include_usage: true },
      },
    ],
    [
      "strings holding braces, quotes and escaped quotes",
      '{"content":"}}\\"}\\\\","stream":true,"x":"{"}',
      { content: '}}"}\\', stream: true, x: "{", stream_options: { include_usage: true } },
    ],
    [
      "non-ASCII text",
      '{"content":"héllo 😀","stream":true}',
      { content: "héllo 😀", stream: true, stream_options: { include_usage: true } },
    ],
    [
      "a client that asked for usage",
      '{"stream":true,"stream_options":{"include_usage":true}}',
      undefined,
    ],
    ["a request that does not stream", '{"model":"m","stream":false}', undefined],
    ["a request without stream", '{"model":"m"}', undefined],
    ['only a nested "stream": true', '{"messages":[{"stream":true}]}', undefined],
    ['"stream": true inside a string', '{"content":"\\"stream\\":true}"}', undefined],
    [
      "stream_options that is not an object (an upstream may ignore it)",
      '{"stream":true,"stream_options":"x"}',
      { stream: true, stream_options: { include_usage: true } },
    ],
    ["an empty object", "{}", undefined],
    ["a JSON array", '[{"stream":true}]', undefined],
    ["a JSON string", '"{\\"stream\\":true}"', undefined],
    ["an object that never closes", '{"stream":true,"messages":[', undefined],
  ];

  it.each(cases)("%s", async (_what, text, parsed) => {
    const body = Buffer.from(text);
    const { sent, clientBodyBytes } = await transformed(body);
    if (parsed === undefined) {
      expect(sent).toBe(text);
      expect(clientBodyBytes).toBe(-1);
      return;
    }
    expect(JSON.parse(sent)).toEqual(parsed);
    expect((JSON.parse(sent) as { stream_options: unknown }).stream_options).toMatchObject({
      include_usage: true,
    });
    // The client's bytes go as they came; the field goes in front of the closing brace.
    const close = text.lastIndexOf("}");
    expect(sent.startsWith(text.slice(0, close))).toBe(true);
    expect(sent.endsWith(text.slice(close))).toBe(true);
    expect(clientBodyBytes).toBe(body.length);
  });

  it.each(cases)("%s: the same at every chunk boundary", async (_what, text) => {
    const body = Buffer.from(text);
    const whole = await transformed(body);
    for (let cut = 0; cut <= body.length; cut++) {
      expect(await transformed(body, [cut])).toEqual(whole);
    }
    expect(await transformed(body, [...body.keys()])).toEqual(whole);
  });

  it("adds the field to a streaming request padded past 1 MiB, passing each chunk on as it comes", async () => {
    const text = `{"model":"m",${" ".repeat(2 * 1024 * 1024)}"stream":true}`;
    const body = Buffer.from(text);
    const cuts = Array.from({ length: 31 }, (_, i) => (i + 1) * 65_536);
    const record = { clientBodyBytes: -1, stripStreamUsage: false };
    const sizes: number[] = [];
    const out: Buffer[] = [];
    for await (const chunk of includeUsageAtEnd(chunksOf(body, cuts), record)) {
      sizes.push(chunk.length);
      out.push(Buffer.from(chunk));
    }
    // Nothing is gathered: every chunk before the last goes on whole, as it came.
    expect(sizes.slice(0, cuts.length)).toEqual(cuts.map(() => 65_536));
    const sent = Buffer.concat(out).toString();
    expect(JSON.parse(sent)).toEqual({
      model: "m",
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(record.clientBodyBytes).toBe(body.length);
  });

  it("adds the field behind a UTF-8 byte order mark, cut anywhere, and keeps the mark", async () => {
    const body = Buffer.from('\ufeff{"stream":true}');
    for (let cut = 0; cut <= body.length; cut++) {
      const { sent, clientBodyBytes } = await transformed(body, [cut]);
      expect(sent).toBe('\ufeff{"stream":true,"stream_options":{"include_usage":true}}');
      expect(clientBodyBytes).toBe(body.length);
    }
  });

  it.each([
    ["a mark cut short", Buffer.from([0xef, 0xbb, 0x7b, 0x7d])],
    [
      "a mark after whitespace",
      Buffer.concat([Buffer.from(" "), Buffer.from('\ufeff{"stream":true}')]),
    ],
  ])("passes %s as it came", async (_what, body) => {
    for (let cut = 0; cut <= body.length; cut++) {
      expect((await transformed(body, [cut])).clientBodyBytes).toBe(-1);
    }
  });

  it("replaces a stream_options too large to keep with include_usage alone", async () => {
    const text = JSON.stringify({ stream: true, stream_options: { x: "y".repeat(5000) } });
    const { sent } = await transformed(Buffer.from(text));
    expect(JSON.parse(sent)).toEqual({ stream: true, stream_options: { include_usage: true } });
  });

  it("adds include_usage alone after a stream_options JSON.parse refuses", async () => {
    // Python's json reads NaN; vLLM would then stream without usage, had the field not come last.
    const { sent } = await transformed(Buffer.from('{"stream":true,"stream_options":{"x":NaN}}'));
    expect(sent).toBe(
      '{"stream":true,"stream_options":{"x":NaN},"stream_options":{"include_usage":true}}',
    );
  });

  it("passes bytes that are not JSON as they came", async () => {
    const body = randomBytes(4096);
    body[0] = 0x5b; // "[": not an object, whatever follows
    const out: Buffer[] = [];
    for await (const chunk of includeUsageAtEnd(chunksOf(body, [100, 2000]), {
      clientBodyBytes: -1,
      stripStreamUsage: false,
    })) {
      out.push(Buffer.from(chunk));
    }
    expect(Buffer.concat(out).equals(body)).toBe(true);
  });
});
