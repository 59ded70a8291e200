import { describe, expect, it } from "vitest";
import { MAX_HELD_BYTES, UsageChunkFilter } from "./usage-chunk-filter.js";

const CONTENT = 'data: {"choices":[{"index":0,"delta":{"content":"hi"}}],"usage":null}\n\n';
const USAGE =
  'data: {"choices":[],"usage":{"prompt_tokens":20,"completion_tokens":40,"total_tokens":60}}\n\n';
const DONE = "data: [DONE]\n\n";

/** Runs `stream` through a filter in pieces cut at `cuts`, and returns what the client gets. */
function filtered(stream: string, cuts: number[] = []): string {
  const filter = new UsageChunkFilter();
  const bytes = Buffer.from(stream);
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(filter.push(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(filter.end());
  return Buffer.concat(out).toString();
}

describe("UsageChunkFilter", () => {
  it("drops the final usage chunk and passes every other event", () => {
    expect(filtered(CONTENT + CONTENT + USAGE + DONE)).toBe(CONTENT + CONTENT + DONE);
  });

  it("drops it wherever the network cut the stream", () => {
    const stream = CONTENT + USAGE + DONE;
    for (let cut = 1; cut < stream.length; cut++) {
      expect(filtered(stream, [cut])).toBe(CONTENT + DONE);
    }
  });

  it("understands CRLF line ends", () => {
    const crlf = (event: string) => event.replaceAll("\n", "\r\n");
    expect(filtered(crlf(CONTENT) + crlf(USAGE) + crlf(DONE))).toBe(crlf(CONTENT) + crlf(DONE));
  });

  it("passes an event too big to hold as it comes, and filters the events after it", () => {
    const big = `data: {"choices":[{"delta":{"content":"${"x".repeat(MAX_HELD_BYTES * 2)}"}}]}\n\n`;
    const filter = new UsageChunkFilter();
    const first = filter.push(Buffer.from(big.slice(0, MAX_HELD_BYTES + 10)));
    // Passed on before its end: a long delta is not held back from the client.
    expect(first.length).toBe(MAX_HELD_BYTES + 10);
    const rest = filter.push(Buffer.from(big.slice(MAX_HELD_BYTES + 10) + USAGE + DONE));
    expect(Buffer.concat([first, rest, filter.end()]).toString()).toBe(big + DONE);
  });

  it("keeps a usage object on a chunk that carries choices", () => {
    const both = 'data: {"choices":[{"delta":{}}],"usage":{"total_tokens":5}}\n\n';
    expect(filtered(both)).toBe(both);
  });

  it("hands over what is left of an event cut without its blank line at the end", () => {
    expect(filtered(`${CONTENT}data: partial`)).toBe(`${CONTENT}data: partial`);
  });
});
