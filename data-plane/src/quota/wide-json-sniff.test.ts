import { describe, expect, it } from "vitest";
import { WIDE_WHITESPACE_LIMIT, WideJsonSniff, wideJsonBody } from "./wide-json-sniff.js";

const OBJECT = '{"model":"m","stream":true}';
const hex = (text: string) => Buffer.from(text.replaceAll(" ", ""), "hex");
const utf16be = (text: string) => Buffer.from(text, "utf16le").swap16();
const utf32 = (text: string, bigEndian: boolean) => {
  const out = Buffer.alloc(text.length * 4);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (bigEndian) out.writeUInt32BE(unit, i * 4);
    else out.writeUInt32LE(unit, i * 4);
  }
  return out;
};
const encodings = {
  "UTF-16-LE": (text: string) => Buffer.from(text, "utf16le"),
  "UTF-16-BE": utf16be,
  "UTF-32-LE": (text: string) => utf32(text, false),
  "UTF-32-BE": (text: string) => utf32(text, true),
};
const marks = {
  "UTF-16-LE": hex("ff fe"),
  "UTF-16-BE": hex("fe ff"),
  "UTF-32-LE": hex("ff fe 00 00"),
  "UTF-32-BE": hex("00 00 fe ff"),
};
const wide = Object.keys(encodings) as (keyof typeof encodings)[];

/**
 * Every body with its verdict, as Python's json.detect_encoding and the first code unit past
 * the mark and whitespace decide it.
 */
const cases: [string, Buffer, "refuse" | "pass"][] = [
  ...wide.flatMap((name): [string, Buffer, "refuse" | "pass"][] => {
    const encode = encodings[name];
    const mark = marks[name];
    return [
      [`a ${name} object`, encode(OBJECT), "refuse"],
      [
        `a ${name} object after its byte order mark`,
        Buffer.concat([mark, encode(OBJECT)]),
        "refuse",
      ],
      [`a ${name} object after whitespace`, encode(` \t\r\n${OBJECT}`), "refuse"],
      [
        `a ${name} object after its mark and whitespace`,
        Buffer.concat([mark, encode(`\n ${OBJECT}`)]),
        "refuse",
      ],
      [`${name} whitespace alone`, encode("  \n  "), "refuse"],
      [`a ${name} mark alone`, mark, "refuse"],
      [
        `${name} whitespace past the limit, then an array`,
        encode(`${" ".repeat(WIDE_WHITESPACE_LIMIT)}[1]`),
        "refuse",
      ],
      [`a ${name} array`, encode(" [1,2]"), "pass"],
      [`a ${name} string`, encode('"{"'), "pass"],
      [
        `a ${name} mark, then a second mark`,
        Buffer.concat([mark, encode(`\ufeff${OBJECT}`)]),
        "pass",
      ],
    ];
  }),
  ["a 2-byte UTF-16-BE `{`", hex("00 7b"), "refuse"],
  ["a 2-byte UTF-16-LE `{`", hex("7b 00"), "refuse"],
  ["a 4-byte UTF-32-LE `{`", hex("7b 00 00 00"), "refuse"],
  ["a UTF-16-LE `{` whose next unit has a high byte (7b 00 00 01)", hex("7b 00 00 01"), "refuse"],
  [
    "an MP4 (UTF-32-BE to Python: a space, then not `{`)",
    hex("00 00 00 20 66 74 79 70 69 73 6f 6d"),
    "pass",
  ],
  ["a UTF-8 object", Buffer.from(OBJECT), "pass"],
  ["a UTF-8 object after whitespace", Buffer.from(`  \n${OBJECT}`), "pass"],
  [
    "a UTF-8 object after its byte order mark",
    Buffer.concat([hex("ef bb bf"), Buffer.from(OBJECT)]),
    "pass",
  ],
  ["a 3-byte body with a NUL (UTF-8 to Python)", hex("7b 00 7d"), "pass"],
  ["a 2-byte UTF-8 object", Buffer.from("{}"), "pass"],
  ["a 1-byte body", Buffer.from("{"), "pass"],
  ["an empty body", Buffer.alloc(0), "pass"],
  ["binary that starts with 4 non-zero bytes", hex("89 50 4e 47 0d 0a 1a 0a 00 00"), "pass"],
];

/** The verdict on `parts` pushed in order, then the end of the body if still undecided. */
function verdictOf(parts: Buffer[]): "refuse" | "pass" {
  const sniff = new WideJsonSniff();
  for (const part of parts) {
    const verdict = sniff.push(part);
    if (verdict !== "undecided") return verdict;
  }
  return sniff.end();
}

describe("WideJsonSniff", () => {
  it.each(cases)("%s: %s whole", (_what, body, expected) => {
    expect(wideJsonBody(body)).toBe(expected);
  });

  it.each(cases)(
    "%s: the same split at every offset, and byte by byte",
    (_what, body, expected) => {
      for (let at = 0; at <= body.length; at++) {
        expect(verdictOf([body.subarray(0, at), body.subarray(at)]), `split at ${at}`).toBe(
          expected,
        );
      }
      const bytes = [...body].map((byte) => Buffer.of(byte));
      expect(verdictOf(bytes)).toBe(expected);
    },
  );

  it("waits for the fourth byte before it decides", () => {
    const sniff = new WideJsonSniff();
    // 7b 00: UTF-16-LE `{` as a 2-byte body, but 7b 00 00 00 is UTF-32-LE, and 7b 00 7d 00 is
    // UTF-16-LE: only the fourth byte tells.
    expect(sniff.push(hex("7b"))).toBe("undecided");
    expect(sniff.push(hex("00"))).toBe("undecided");
    expect(sniff.push(hex("00"))).toBe("undecided");
    expect(sniff.push(hex("00"))).toBe("refuse");
  });

  it("decides on a UTF-8 body at its fourth byte, and reads no further", () => {
    const sniff = new WideJsonSniff();
    expect(sniff.push(Buffer.from(OBJECT))).toBe("pass");
    // A wide-looking chunk later on changes nothing.
    expect(sniff.push(hex("00 7b 00 7b"))).toBe("pass");
    expect(sniff.end()).toBe("pass");
  });

  it("refuses wide whitespace at the limit without waiting for the end", () => {
    const sniff = new WideJsonSniff();
    const blank = Buffer.from(" ".repeat(WIDE_WHITESPACE_LIMIT / 2 - 1), "utf16le");
    expect(sniff.push(blank)).toBe("undecided");
    expect(sniff.push(Buffer.from(" ", "utf16le"))).toBe("refuse");
  });
});
