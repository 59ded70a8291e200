import { bodyRefusal } from "../errors/body-refusal.js";

/** The code of the error a body past its route's maxBodyBytes fails with. */
export const BODY_TOO_LARGE = "CLAWGATE_BODY_TOO_LARGE";

/**
 * A streamed (chunked) request body passed on chunk by chunk, failing with BODY_TOO_LARGE at
 * the first chunk that takes it past `maxBytes`: nothing is buffered, and the upstream never
 * gets more than the limit. The proxy answers that failure with 413.
 */
export async function* limitedBody(
  source: AsyncIterable<Uint8Array>,
  maxBytes: number,
): AsyncGenerator<Uint8Array> {
  let seen = 0;
  for await (const chunk of source) {
    seen += chunk.length;
    if (seen > maxBytes) {
      throw bodyRefusal(
        BODY_TOO_LARGE,
        "CLAWGATE_PAYLOAD_TOO_LARGE",
        `request body over maxBodyBytes (${maxBytes})`,
      );
    }
    yield chunk;
  }
}
