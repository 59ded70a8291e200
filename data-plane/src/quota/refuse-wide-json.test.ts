import { describe, expect, it } from "vitest";
import { REFUSED_BODY_DRAIN_BYTES, refuseWideJson, WIDE_JSON_REFUSED } from "./refuse-wide-json.js";

/** A source of `chunks` that records how far it was read and whether it was stopped. */
function recorded(chunks: Buffer[]) {
  const state = { read: 0, stopped: false, ended: false };
  let finished: () => void = () => {};
  /** Settles once the source ended or was stopped. */
  const settled = new Promise<void>((resolve) => {
    finished = resolve;
  });
  async function* source(): AsyncGenerator<Uint8Array> {
    try {
      for (const chunk of chunks) {
        state.read++;
        yield chunk;
      }
      state.ended = true;
    } finally {
      if (!state.ended) state.stopped = true;
      finished();
    }
  }
  return { source: source(), state, settled };
}

/** What the consumer got before the stream ended, and the error it ended with. */
async function consume(body: AsyncIterable<Uint8Array>, stopAfter = Number.POSITIVE_INFINITY) {
  const got: Buffer[] = [];
  try {
    for await (const chunk of body) {
      got.push(Buffer.from(chunk));
      if (got.length >= stopAfter) break;
    }
  } catch (error) {
    return { got, error: error as { code?: unknown } };
  }
  return { got, error: undefined };
}

describe("refuseWideJson", () => {
  it.each([
    ["a UTF-8 body", [Buffer.from('{"str'), Buffer.from('eam":true}')]],
    [
      "a UTF-8 body after its byte order mark",
      [Buffer.from([0xef, 0xbb]), Buffer.from('\xbf{"stream":true}', "latin1")],
    ],
  ])("passes %s on chunk by chunk, as it came", async (_what, chunks) => {
    const { source, state } = recorded(chunks);
    const { got, error } = await consume(refuseWideJson(source));
    expect(error).toBeUndefined();
    expect(got).toEqual(chunks);
    expect(state.ended).toBe(true);
  });

  it("fails a UTF-16 object at its first bytes, and reads the rest of the source", async () => {
    const body = Buffer.from('{"stream":true}', "utf16le");
    const chunks = [body.subarray(0, 1), body.subarray(1, 6), body.subarray(6)];
    const { source, state, settled } = recorded(chunks);
    const { got, error } = await consume(refuseWideJson(source));
    expect(error?.code).toBe(WIDE_JSON_REFUSED);
    // The first byte decided nothing and went on; the chunk that did never did.
    expect(got).toEqual([chunks[0]]);
    // Read to its end, not stopped: stopping the client's request would cut its connection.
    await settled;
    expect(state).toEqual({ read: 3, stopped: false, ended: true });
  });

  it("stops reading a refused body once REFUSED_BODY_DRAIN_BYTES more came", async () => {
    const head = Buffer.from('{"stream":true}', "utf16le");
    const rest = Array.from({ length: 80 }, () => Buffer.alloc(64 * 1024, 0x20));
    const { source, state, settled } = recorded([head, ...rest]);
    const { error } = await consume(refuseWideJson(source));
    expect(error?.code).toBe(WIDE_JSON_REFUSED);
    await settled;
    // The chunk that takes the drained bytes past the bound is the last read: stopped there.
    expect(state).toEqual({
      read: 1 + REFUSED_BODY_DRAIN_BYTES / (64 * 1024) + 1,
      stopped: true,
      ended: false,
    });
  });

  it("fails a wide body that ended as whitespace after it passed it on, so it never completes", async () => {
    const chunks = [Buffer.from("  ", "utf16le")];
    const { got, error } = await consume(refuseWideJson(recorded(chunks).source));
    expect(got).toEqual(chunks);
    expect(error?.code).toBe(WIDE_JSON_REFUSED);
  });

  it("stops its source when the consumer stops", async () => {
    const { source, state } = recorded([Buffer.from("{}  "), Buffer.from("  "), Buffer.from("  ")]);
    await consume(refuseWideJson(source), 1);
    expect(state.stopped).toBe(true);
  });
});
