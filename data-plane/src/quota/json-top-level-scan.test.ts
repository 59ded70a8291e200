import { describe, expect, it, vi } from "vitest";
import { JsonTopLevelScan, TOP_LEVEL_VALUE_BYTES, VALUE_TOO_LARGE } from "./json-top-level-scan.js";
import { laxTrue } from "./lax-json-match.js";

/** What a scan concluded, and where (in the whole body) it saw the object close. */
interface Seen {
  closedAt: number;
  notObject: boolean;
  hasMembers: boolean;
  streams: boolean;
  streamOptions: string | typeof VALUE_TOO_LARGE | undefined;
}

/** Scans `body` cut at the given offsets (none: one chunk). */
function scan(body: Buffer, cuts: number[] = []): Seen {
  const scanner = new JsonTopLevelScan();
  let closedAt = -1;
  let from = 0;
  for (const to of [...cuts, body.length]) {
    const at = scanner.push(body.subarray(from, to));
    if (at >= 0) {
      expect(closedAt).toBe(-1);
      closedAt = from + at;
    }
    from = to;
  }
  const options = scanner.streamOptions;
  return {
    closedAt,
    notObject: scanner.notObject,
    hasMembers: scanner.hasMembers,
    streams: scanner.streams,
    streamOptions: Buffer.isBuffer(options) ? options.toString() : options,
  };
}

const last = (body: string) => Buffer.byteLength(body) - 1;

describe("JsonTopLevelScan", () => {
  // [what, body, streams, stream_options kept]
  const cases: [string, string, boolean, string | undefined][] = [
    ["a streaming request", '{"model":"m","stream":true}', true, undefined],
    ["a request that does not stream", '{"model":"m","stream":false}', false, undefined],
    ["a request without stream", '{"model":"m"}', false, undefined],
    // Read as loosely as any upstream may: pydantic's lax mode, Go's case-insensitive keys.
    ["stream as a string pydantic takes", '{"stream":"true"}', true, undefined],
    ["stream as 1", '{"stream":1}', true, undefined],
    ["stream as 1.0", '{"stream":1.0}', true, undefined],
    ["stream as 10e-1", '{"stream":10E-1}', true, undefined],
    ['stream as "Yes"', '{"stream":"Yes"}', true, undefined],
    ['stream as an escaped "on"', '{"stream":"\\u006FN"}', true, undefined],
    ['stream as "t"', '{"stream":"t"}', true, undefined],
    ['stream as "y"', '{"stream":"Y"}', true, undefined],
    ['stream as "1"', '{"stream":"1"}', true, undefined],
    ["stream as 0", '{"stream":0}', false, undefined],
    ["stream as -1", '{"stream":-1}', false, undefined],
    ["stream as 2", '{"stream":2}', false, undefined],
    ['stream as "no"', '{"stream":"no"}', false, undefined],
    ['stream as "yes "', '{"stream":"yes "}', false, undefined],
    ["stream as null", '{"stream":null}', false, undefined],
    ["stream as an object", '{"stream":{"a":true}}', false, undefined],
    ["a Stream key (Go reads it)", '{"Stream":true}', true, undefined],
    ["a STREAM key escaped", '{"\\u0053TREAM":true}', true, undefined],
    ["a key with a long s (Go folds it)", '{"\u017ftream":true}', true, undefined],
    ["a key with the long s escaped", '{"\\u017Ftream":true}', true, undefined],
    [
      "a stream value too long to keep (1.000...0 is 1 to Python)",
      `{"stream":1.${"0".repeat(5000)}}`,
      true,
      undefined,
    ],
    [
      "a stream_options key with a dotless i (Go folds it)",
      '{"stream_opt\u0131ons":{},"stream":true}',
      true,
      "{}",
    ],
    ["a key that only starts like stream", '{"streams":true}', false, undefined],
    ["a key one letter off", '{"strean":true}', false, undefined],
    [
      "an exact stream true before a folded one false (Python reads the first)",
      '{"stream":true,"Stream":false}',
      true,
      undefined,
    ],
    [
      "a folded stream true before an exact one false (Go reads the last)",
      '{"STREAM":true,"stream":false}',
      false,
      undefined,
    ],
    [
      "a folded stream false after a folded one true",
      '{"STREAM":true,"Stream":false}',
      false,
      undefined,
    ],
    [
      "a Stream_Options key",
      '{"stream":true,"Stream_Options":{"include_usage":true}}',
      true,
      '{"include_usage":true}',
    ],
    ["whitespace everywhere", '\n { "stream" :\t true \r\n}', true, undefined],
    [
      'a "stream": true nested in messages',
      '{"messages":[{"role":"user","stream":true,"content":{"stream":true}}],"stream":false}',
      false,
      undefined,
    ],
    ['a "stream": true key in an array', '{"a":[{"stream":true}]}', false, undefined],
    [
      "strings holding braces, quotes and escaped quotes",
      '{"content":"}]{\\"stream\\":true,\\"x\\":\\"}","note":"\\\\","stream":true}',
      true,
      undefined,
    ],
    [
      "a value string that reads like the key",
      '{"model":"stream","x":"stream","stream":true}',
      true,
      undefined,
    ],
    ["an escaped key", '{"str\\u0065am":true}', true, undefined],
    ["a key with a trailing escaped quote", '{"stream\\"":true}', false, undefined],
    ["the last of two stream keys (false)", '{"stream":true,"stream":false}', false, undefined],
    ["the last of two stream keys (true)", '{"stream":false,"stream":true}', true, undefined],
    [
      "the client's stream_options, whitespace left out",
      '{"stream":true,"stream_options": { "include_usage" : false, "x": "a b" } }',
      true,
      '{"include_usage":false,"x":"a b"}',
    ],
    [
      "stream_options before stream",
      '{"stream_options":{"include_usage":true},"stream":true}',
      true,
      '{"include_usage":true}',
    ],
    ["escaped stream_options", '{"stream\\u005foptions":null}', false, "null"],
    [
      "non-ASCII text around the keys",
      '{"content":"héllo 😀 \\u00e9","stream":true,"ß":"ü"}',
      true,
      undefined,
    ],
  ];

  it.each(cases)("%s", (_what, text, streams, options) => {
    const body = Buffer.from(text);
    expect(scan(body)).toEqual({
      closedAt: last(text.trimEnd()),
      notObject: false,
      hasMembers: true,
      streams,
      streamOptions: options,
    });
  });

  it.each(cases)("%s: the same at every chunk boundary", (_what, text) => {
    const body = Buffer.from(text);
    const whole = scan(body);
    for (let cut = 0; cut <= body.length; cut++) expect(scan(body, [cut])).toEqual(whole);
    // One byte a chunk: every escape, key, `true` and UTF-8 sequence split everywhere at once.
    expect(scan(body, [...body.keys()])).toEqual(whole);
  });

  it("finds the closing brace with whitespace after it, and scans nothing after it", () => {
    const text = '{"a":1}  \n{"stream":true}';
    expect(scan(Buffer.from(text))).toMatchObject({ closedAt: 6, streams: false });
  });

  it("an empty object closes with no members", () => {
    expect(scan(Buffer.from(" {} "))).toEqual({
      closedAt: 2,
      notObject: false,
      hasMembers: false,
      streams: false,
      streamOptions: undefined,
    });
  });

  it.each([
    ["an array", '[{"stream":true}]'],
    ["a string", '"{\\"stream\\":true}"'],
    ["a number", "  42"],
    ["a literal", "true"],
    ["a nesting that closes below the top", '{"a":]]{"stream":true}'],
  ])("calls %s not an object, and never sees it close", (_what, text) => {
    expect(scan(Buffer.from(text))).toMatchObject({
      closedAt: -1,
      notObject: true,
      streams: false,
    });
  });

  it("waits through whitespace for the first byte", () => {
    const scanner = new JsonTopLevelScan();
    expect(scanner.push(Buffer.from("  \n"))).toBe(-1);
    expect(scanner.notObject).toBe(false);
    expect(scanner.push(Buffer.from('{"stream":true}'))).toBe(14);
    expect(scanner.streams).toBe(true);
  });

  it("an object that never closes is not closed", () => {
    const scanner = new JsonTopLevelScan();
    expect(scanner.push(Buffer.from('{"stream":true,"messages":[{"x":"}'))).toBe(-1);
    expect(scanner.closed).toBe(false);
  });

  it("keeps no stream_options past its limit, but whitespace padding does not count", () => {
    const big = JSON.stringify({ stream: true, stream_options: { x: "y".repeat(5000) } });
    expect(scan(Buffer.from(big)).streamOptions).toBe(VALUE_TOO_LARGE);
    const padded = `{"stream":${" ".repeat(2 * TOP_LEVEL_VALUE_BYTES)}true,"stream_options":{${" ".repeat(2 * TOP_LEVEL_VALUE_BYTES)}"include_usage":true}}`;
    expect(scan(Buffer.from(padded))).toMatchObject({
      streams: true,
      streamOptions: '{"include_usage":true}',
    });
  });
});

describe("JsonTopLevelScan's cost per top-level member", () => {
  // A client picks how many members it sends: what the scan does per member must not allocate
  // (a copy, a view, a string, a JSON.parse each), or `{"\n":0,"\n":0,...}` costs ten times
  // what JSON.parse of it does. Counting the calls that make new objects shows it honestly.
  type Spied = Record<string, (...args: never[]) => unknown>;
  const makers: [object, string][] = [
    [Buffer, "from"],
    [Buffer, "alloc"],
    [Buffer, "allocUnsafe"],
    [Buffer, "concat"],
    [Buffer.prototype, "subarray"],
    [Buffer.prototype, "slice"],
    [Buffer.prototype, "toString"],
    [Uint8Array.prototype, "subarray"],
    [Uint8Array.prototype, "slice"],
    [JSON, "parse"],
    [String, "fromCharCode"],
  ];

  it.each([
    ["short keys", '"a":0,'],
    ["escaped keys", '"\\n":0,'],
    ["keys that start like stream", '"strea":0,'],
    ["stream keys", '"stream":true,'],
    ["folded, escaped stream keys", '"\\u0053tream":"yes",'],
    ["stream_options keys", '"stream_options":{"a":1},'],
    ["oversized stream_options", `"stream_options":"${"x".repeat(5000)}",`],
  ])("allocates nothing per member for %s", (_what, member) => {
    const body = Buffer.from(`{"stream":true,${member.repeat(2000)}"z":0}`);
    const chunks: Buffer[] = [];
    for (let at = 0; at < body.length; at += 16_384) chunks.push(body.subarray(at, at + 16_384));
    const scanner = new JsonTopLevelScan();
    const spies = makers.map(([owner, name]) => vi.spyOn(owner as Spied, name));
    let calls: number;
    try {
      for (const chunk of chunks) scanner.push(chunk);
    } finally {
      calls = spies.reduce((sum, spy) => sum + spy.mock.calls.length, 0);
      for (const spy of spies) spy.mockRestore();
    }
    expect(scanner.closed).toBe(true);
    // Two capture buffers for the whole scan (the value being read and the last stream_options
    // kept), made the first time they are needed.
    expect(calls).toBeLessThanOrEqual(2);
  });
});

describe("JsonTopLevelScan against JSON.parse", () => {
  // A seeded generator, so a failure names a body that can be made again.
  let seed = 0x2545f491;
  const random = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  // Strings made of what a scan must step through with care: quotes, backslashes, braces,
  // the watched keys' names, escapes JSON.stringify writes, non-ASCII.
  const pieces = [
    '"',
    "\\",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "stream",
    "stream_options",
    "\n",
    "é",
    "😀",
    "true",
    " ",
    "x".repeat(40),
  ];
  const text = () => Array.from({ length: Math.floor(random() * 8) }, () => pick(pieces)).join("");
  const value = (depth: number): unknown => {
    const kind = Math.floor(random() * (depth > 2 ? 4 : 6));
    if (kind === 0) return text();
    if (kind === 1) return random() < 0.5;
    if (kind === 2) return Math.floor(random() * 1000);
    if (kind === 3) return null;
    if (kind === 4) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth + 1));
    return object(depth + 1);
  };
  const object = (depth: number): Record<string, unknown> => {
    const fields: Record<string, unknown> = {};
    for (let n = Math.floor(random() * 4); n > 0; n--)
      fields[pick([text(), "stream"])] = value(depth);
    return fields;
  };

  it("agrees with JSON.parse on the top-level stream and stream_options of 300 generated bodies, cut anywhere", () => {
    for (let round = 0; round < 300; round++) {
      const top = object(0);
      if (random() < 0.6)
        top.stream = random() < 0.7 ? true : pick([false, "true", 1, 0, "no", "YES", 1.5, null]);
      if (random() < 0.4)
        top.stream_options =
          random() < 0.8 ? { include_usage: random() < 0.5, note: text() } : null;
      const body = Buffer.from(JSON.stringify(top, null, random() < 0.3 ? 2 : undefined));
      const parsed = JSON.parse(body.toString()) as Record<string, unknown>;
      const cuts = Array.from({ length: 3 }, () => Math.floor(random() * body.length)).sort(
        (a, b) => a - b,
      );
      const seen = scan(body, cuts);
      expect(seen.closedAt, body.toString()).toBe(body.length - 1);
      expect(seen.streams, body.toString()).toBe(laxTrue(parsed.stream));
      const options = seen.streamOptions;
      expect(typeof options === "string" ? JSON.parse(options) : options, body.toString()).toEqual(
        parsed.stream_options,
      );
    }
  });
});
