import { bodyRefusal } from "../errors/body-refusal.js";
import { WideJsonSniff } from "./wide-json-sniff.js";

/** The code of the error a body streamed upstream fails with when it is wide JSON. */
export const WIDE_JSON_REFUSED = "CLAWGATE_WIDE_JSON_REFUSED";

/**
 * A request body streamed upstream (route usage.injectStreamUsage, too large to read whole),
 * passed on chunk by chunk while its first bytes are sniffed (wide-json-sniff.ts): a UTF-16/32
 * JSON object fails the stream with WIDE_JSON_REFUSED, which the proxy answers with 415. It
 * fails before the body's end, so the upstream never gets a complete request to parse.
 *
 * It reads the client's body itself, under anything that may stop early (the maxBodyBytes cut,
 * the include_usage scan), and on a refusal goes on reading it to its end (for at most
 * REFUSED_BODY_DRAIN_BYTES) and lets it go, as node:http does with a body nobody read: stopping
 * the read would destroy the client's request, and with it the connection the 415 goes out on.
 * Stopped from above (a failed upstream), it stops its source as a for-await loop would.
 */
export async function* refuseWideJson(
  source: AsyncIterable<Uint8Array>,
): AsyncGenerator<Uint8Array> {
  const sniff = new WideJsonSniff();
  const chunks = source[Symbol.asyncIterator]();
  let undecided = true;
  let refused = false;
  try {
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
      if (undecided) {
        const verdict = sniff.push(next.value);
        refused = verdict === "refuse";
        if (refused) break;
        undecided = verdict === "undecided";
      }
      yield next.value;
    }
    // A body shorter than the sniff's limit, all passed on: refused, it still goes incomplete.
    if (undecided && !refused) refused = sniff.end() === "refuse";
  } finally {
    if (!refused) await chunks.return?.();
  }
  if (refused) {
    void drain(chunks);
    throw bodyRefusal(
      WIDE_JSON_REFUSED,
      "CLAWGATE_UNSUPPORTED_MEDIA_TYPE",
      "request body is UTF-16 or UTF-32 JSON",
    );
  }
}

/**
 * Bytes of a refused body read and dropped after the refusal, at most: a client that keeps
 * sending past it has its request stopped (its connection closes) rather than read without end,
 * whatever the route's maxBodyBytes, which this read comes before.
 */
export const REFUSED_BODY_DRAIN_BYTES = 4 * 1024 * 1024;

/**
 * Reads what is left and drops it, up to REFUSED_BODY_DRAIN_BYTES; a client that leaves
 * meanwhile ends it (its error is moot).
 */
async function drain(chunks: AsyncIterator<Uint8Array>): Promise<void> {
  let drained = 0;
  try {
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) {
      drained += next.value.length;
      if (drained > REFUSED_BODY_DRAIN_BYTES) {
        await chunks.return?.();
        return;
      }
    }
  } catch {}
}
