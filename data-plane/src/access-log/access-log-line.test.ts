import { describe, expect, it } from "vitest";
import {
  type AccessLogLine,
  emptyAccessLogLine,
  resetAccessLogLine,
  worstAccessLogLineBytes,
  writeAccessLogLine,
} from "./access-log-line.js";
import { JsonLineWriter } from "./json-line-writer.js";
import { LogTime } from "./log-time.js";

const AT = Date.parse("2026-12-01T03:30:00.123Z");

/** The line's bytes, written into a buffer of exactly the room the writer reserves. */
function lineBytes(line: AccessLogLine, time = new LogTime(), at = AT): Buffer {
  const out = new JsonLineWriter(Buffer.alloc(worstAccessLogLineBytes(line)));
  writeAccessLogLine(out, line, time, at);
  return out.buffer.subarray(0, out.used);
}

function serializeAccessLogLine(line: AccessLogLine, time = new LogTime(), at = AT): string {
  return lineBytes(line, time, at).toString("utf8");
}

function full(): AccessLogLine {
  return {
    requestId: "3f2a9c01d4e5-1k",
    client: "10.0.0.7",
    method: "POST",
    host: "api.example.com",
    path: "/v1/chat",
    route: "chat",
    upstream: "agents",
    node: "10.0.0.5:8080",
    status: 502,
    attempts: 2,
    bytesIn: 512,
    bytesOut: 112,
    headersMs: 41.7,
    durationMs: 41.83,
    failure: "refused",
    stale: true,
  };
}

/** What JSON.stringify writes for the same fields (how the log was written before). */
function stringified(line: AccessLogLine): string {
  const { stale, ...rest } = line;
  const roundMs = (ms: number) => Math.round(ms * 100) / 100;
  return `${JSON.stringify({
    log: "access",
    time: new Date(AT).toISOString(),
    ...rest,
    headersMs: roundMs(line.headersMs),
    durationMs: roundMs(line.durationMs),
    stale: stale ? true : undefined,
  })}\n`;
}

describe("serializeAccessLogLine", () => {
  it("writes every field, in order, as JSON.stringify would", () => {
    const text = serializeAccessLogLine(full(), new LogTime(), AT);
    expect(text).toBe(
      '{"log":"access","time":"2026-12-01T03:30:00.123Z","requestId":"3f2a9c01d4e5-1k",' +
        '"client":"10.0.0.7","method":"POST","host":"api.example.com","path":"/v1/chat",' +
        '"route":"chat","upstream":"agents","node":"10.0.0.5:8080","status":502,"attempts":2,' +
        '"bytesIn":512,"bytesOut":112,"headersMs":41.7,"durationMs":41.83,"failure":"refused",' +
        '"stale":true}\n',
    );
    expect(text).toBe(stringified(full()));
  });

  it("leaves out undefined fields, no failure and no stale flag", () => {
    const line = emptyAccessLogLine();
    line.requestId = "r1";
    line.path = "/nowhere";
    line.status = 404;
    line.bytesIn = undefined;
    const text = serializeAccessLogLine(line, new LogTime(), AT);
    expect(JSON.parse(text)).toEqual({
      log: "access",
      time: "2026-12-01T03:30:00.123Z",
      requestId: "r1",
      path: "/nowhere",
      status: 404,
      attempts: 0,
      bytesOut: 0,
      headersMs: 0,
      durationMs: 0,
    });
    expect(text).toBe(stringified(line));
  });

  it("writes a number JSON cannot hold as null, as JSON.stringify does", () => {
    const line = full();
    line.durationMs = Number.NaN;
    line.headersMs = Number.POSITIVE_INFINITY;
    const parsed = JSON.parse(serializeAccessLogLine(line, new LogTime(), AT));
    expect([parsed.durationMs, parsed.headersMs]).toEqual([null, null]);
  });

  it("escapes what a client controls (path, host) into valid JSON that reads back the same", () => {
    const hostile = [
      'a"b',
      "back\\slash",
      "new\nline\r\ttab",
      "\u0000nul\u001fus\u007fdel",
      '"},"status":200,"x":"',
      "caf\u00e9 \u65e5\u672c \u{1f600}",
      "lone \ud800 high and \udfff low",
      "",
    ];
    for (const value of hostile) {
      const line = full();
      line.path = value;
      line.host = value;
      const text = serializeAccessLogLine(line, new LogTime(), AT);
      expect(text.endsWith("}\n")).toBe(true);
      expect(text.indexOf("\n")).toBe(text.length - 1);
      const parsed = JSON.parse(text);
      expect(parsed.path).toBe(value);
      expect(parsed.host).toBe(parsed.path);
      expect(parsed.status).toBe(502);
      expect(text).toBe(stringified(line));
    }
  });

  it("keeps a line valid UTF-8 when a path carries a lone surrogate", () => {
    const line = full();
    line.path = "/x\ud800y";
    const bytes = Buffer.from(serializeAccessLogLine(line, new LogTime(), AT));
    // A lone surrogate written raw would become U+FFFD; escaped, it reads back as itself.
    expect(JSON.parse(bytes.toString("utf8")).path).toBe("/x\ud800y");
  });

  it("resets every field of a reused line", () => {
    const line = full();
    resetAccessLogLine(line);
    expect(line).toEqual(emptyAccessLogLine());
  });
});

describe("JsonLineWriter", () => {
  function written(write: (out: JsonLineWriter) => void): string {
    const out = new JsonLineWriter(Buffer.alloc(256));
    write(out);
    return out.buffer.subarray(0, out.used).toString("utf8");
  }

  it("writes strings as JSON.stringify, escaping only what needs it", () => {
    const values = [
      "GET",
      "/api/items",
      "127.0.0.1:8080",
      "~ !#",
      "\u00e9",
      'q"',
      "\u0001",
      "\\",
      "\u007f",
    ];
    for (const value of values)
      expect(written((out) => out.string(value))).toBe(JSON.stringify(value));
  });

  it("writes numbers as JSON.stringify", () => {
    const values = [0, 7, 10, 99, 100, 1_000_000, 2 ** 53 - 1, 2 ** 53, -1, 1.5, 1e21, Number.NaN];
    for (const value of values)
      expect(written((out) => out.number(value))).toBe(JSON.stringify(value));
  });

  it("writes durations to 0.01 as JSON.stringify writes the rounded number", () => {
    const values = [0, 0.004, 0.005, 0.05, 0.1, 0.999, 1, 9.995, 41.7, 41.83, 123456.789, -0.5];
    // And a spread of realistic durations, from microseconds to minutes.
    for (let i = 0; i < 2_000; i++) values.push(Math.exp(i / 100) / 1_000);
    for (const value of [...values, Number.POSITIVE_INFINITY]) {
      const rounded = Math.round(value * 100) / 100;
      expect(written((out) => out.hundredths(value))).toBe(JSON.stringify(rounded));
    }
  });

  it("pads the milliseconds of a time", () => {
    const padded = (out: JsonLineWriter) => {
      for (const ms of [0, 7, 42, 999]) out.padded(ms, 3);
    };
    expect(written(padded)).toBe("000007042999");
  });
});

describe("LogTime", () => {
  it("formats as toISOString, across seconds, minutes and days", () => {
    const time = new LogTime();
    const instants = [
      AT,
      AT + 1,
      AT + 876,
      AT + 877,
      Date.parse("2026-12-31T23:59:59.999Z"),
      Date.parse("2027-01-01T00:00:00.000Z"),
      Date.parse("2027-01-01T00:00:00.007Z"),
      Date.parse("2027-01-01T00:00:00.042Z"),
      AT, // back in time: the clock may step
    ];
    for (const ms of instants) expect(time.format(ms)).toBe(new Date(ms).toISOString());
  });
});
