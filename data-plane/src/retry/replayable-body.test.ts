import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { BODY_NOT_REPLAYABLE, ReplayableBody } from "./replayable-body.js";

const bytes = (text: string) => new TextEncoder().encode(text);

/** A source that counts how many chunks were pulled from it. */
function counting(chunks: string[]) {
  const state = { pulled: 0 };
  async function* source() {
    for (const chunk of chunks) {
      state.pulled += 1;
      yield bytes(chunk);
    }
  }
  return { state, source: source() };
}

async function text(body: AsyncIterable<Uint8Array>, stopAfter = Number.POSITIVE_INFINITY) {
  let out = "";
  let n = 0;
  for await (const chunk of body) {
    out += new TextDecoder().decode(chunk);
    if (++n >= stopAfter) break;
  }
  return out;
}

describe("ReplayableBody", () => {
  it("replays a small body for every attempt, reading the client once", async () => {
    const { state, source } = counting(["ab", "cd", "ef"]);
    const body = new ReplayableBody(source);
    expect(await text(body.attempt())).toBe("abcdef");
    expect(body.complete).toBe(true);
    expect(body.replayable).toBe(true);
    expect(await text(body.attempt())).toBe("abcdef");
    expect(state.pulled).toBe(3);
    expect(body.bytesRead).toBe(6);
  });

  it("an attempt that stopped early leaves the rest for the next one", async () => {
    const { source } = counting(["ab", "cd", "ef"]);
    const body = new ReplayableBody(source);
    expect(await text(body.attempt(), 1)).toBe("ab");
    expect(body.complete).toBe(false);
    expect(body.replayable).toBe(true);
    expect(await text(body.attempt())).toBe("abcdef");
  });

  it("a body never read (connection refused) is replayable whatever its size", async () => {
    const { state, source } = counting(["x".repeat(100), "y".repeat(100)]);
    const body = new ReplayableBody(source, { limitBytes: 10 });
    body.attempt(); // created, never iterated: undici never got to write it
    expect(body.replayable).toBe(true);
    expect(state.pulled).toBe(0);
    expect(await text(body.attempt())).toBe("x".repeat(100) + "y".repeat(100));
  });

  it("streams a body over the limit through once, then refuses to replay it", async () => {
    const body = new ReplayableBody(Readable.from([bytes("12345"), bytes("67890"), bytes("abc")]), {
      limitBytes: 8,
    });
    expect(await text(body.attempt())).toBe("1234567890abc");
    expect(body.replayable).toBe(false);
    await expect(text(body.attempt())).rejects.toMatchObject({ code: BODY_NOT_REPLAYABLE });
  });

  it("a body exactly at the limit stays replayable", async () => {
    const body = new ReplayableBody(Readable.from([bytes("1234"), bytes("5678")]), {
      limitBytes: 8,
    });
    expect(await text(body.attempt())).toBe("12345678");
    expect(body.replayable).toBe(true);
    expect(await text(body.attempt())).toBe("12345678");
  });

  it("defaults to a 64 KiB limit", async () => {
    const kib = new Uint8Array(1_024);
    const fits = new ReplayableBody(Readable.from(Array.from({ length: 64 }, () => kib)));
    await text(fits.attempt());
    expect(fits.replayable).toBe(true);
    const over = new ReplayableBody(Readable.from(Array.from({ length: 65 }, () => kib)));
    await text(over.attempt());
    expect(over.replayable).toBe(false);
  });

  it("passes a client error on to the attempt", async () => {
    async function* broken() {
      yield bytes("ab");
      throw new Error("client went away");
    }
    const body = new ReplayableBody(broken());
    await expect(text(body.attempt())).rejects.toThrow("client went away");
    await expect(text(body.attempt())).rejects.toThrow("client went away");
  });

  it("two attempts reading at once share one read of the client", async () => {
    const { state, source } = counting(["a", "b", "c"]);
    const body = new ReplayableBody(source);
    const [first, second] = await Promise.all([text(body.attempt()), text(body.attempt())]);
    expect([first, second]).toEqual(["abc", "abc"]);
    expect(state.pulled).toBe(3);
  });
});
