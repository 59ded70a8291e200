import { describe, expect, it } from "vitest";
import { LineBatch } from "./line-batch.js";

/** Appends `text` as the writer would a line: room reserved for it, then written. */
function append(batch: LineBatch, text: string): void {
  const out = batch.reserve(2 + 6 * text.length);
  out.string(text);
  out.ascii("\n");
}

describe("LineBatch", () => {
  it("hands on whole lines only, in order, once the next one would not fit", () => {
    const chunks: string[] = [];
    const batch = new LineBatch(48, (chunk) => chunks.push(chunk.toString("utf8")));
    for (let i = 0; i < 10; i++) append(batch, `line ${i}`);
    batch.flush();
    expect(chunks.length).toBeGreaterThan(1);
    for (const chunk of chunks) expect(chunk.endsWith("\n")).toBe(true);
    expect(chunks.join("")).toBe(Array.from({ length: 10 }, (_, i) => `"line ${i}"\n`).join(""));
  });

  it("encodes multi-byte characters whole and gives a line larger than a batch its own", () => {
    const chunks: Buffer[] = [];
    const batch = new LineBatch(64, (chunk) => chunks.push(chunk));
    const long = "\u65e5".repeat(40);
    append(batch, "a\u00e9");
    append(batch, long);
    append(batch, "\u{1f600}");
    expect(batch.empty).toBe(false);
    batch.flush();
    expect(batch.empty).toBe(true);
    const texts = chunks.map((c) => c.toString("utf8"));
    expect(texts[0]).toBe('"a\u00e9"\n');
    expect(texts[1]!.startsWith(`"${long}"\n`)).toBe(true);
    expect(texts.join("")).toBe(`"a\u00e9"\n"${long}"\n"\u{1f600}"\n`);
  });

  it("hands on nothing when nothing was written", () => {
    const chunks: Buffer[] = [];
    const batch = new LineBatch(32, (chunk) => chunks.push(chunk));
    batch.flush();
    expect(chunks).toEqual([]);
  });
});
