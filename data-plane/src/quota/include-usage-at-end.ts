import { JsonTopLevelScan } from "./json-top-level-scan.js";
import { includeUsageField } from "./stream-usage-request.js";

/** Where the transform records that it asked for usage (an Exchange). */
export interface ClientBodyRecord {
  /**
   * The client's own bytes, set (>= 0) once include_usage was added: the access log counts these
   * rather than the bytes sent upstream.
   */
  clientBodyBytes: number;
  /** Set once include_usage was added for the gateway alone: the usage chunk is not the client's. */
  stripStreamUsage: boolean;
}

/**
 * A request body too large to read whole (route usage.injectStreamUsage, over
 * STREAM_USAGE_BODY_LIMIT), passed on chunk by chunk as it comes while its top level is scanned.
 * The `}` that closes the top-level object is the first point where every top-level key has
 * been seen, so the decision is made there: for a request that streams and did not ask for
 * usage, `,"stream_options":{...,"include_usage":true}` goes out in front of that `}`. Nothing
 * has to be held back: the bytes before the `}` are already on their way, the `}` and what
 * follows it go after the field. A body that is not an object, or whose object never closes,
 * passes as it came. The body's length changes, so it must go upstream without Content-Length.
 */
export async function* includeUsageAtEnd(
  source: AsyncIterable<Uint8Array>,
  record: ClientBodyRecord,
): AsyncGenerator<Uint8Array> {
  const scan = new JsonTopLevelScan();
  let clientBytes = 0;
  let added = false;
  for await (const chunk of source) {
    clientBytes += chunk.length;
    if (added) {
      // Only whitespace (or what a parser upstream refuses) follows the object.
      record.clientBodyBytes = clientBytes;
      yield chunk;
      continue;
    }
    const closedAt = scan.push(chunk);
    const field = closedAt < 0 ? undefined : includeUsageField(scan);
    if (field === undefined) {
      yield chunk;
      continue;
    }
    // Recorded before the field goes out: the response cannot start before the body's end.
    record.clientBodyBytes = clientBytes;
    record.stripStreamUsage = field.stripUsage;
    added = true;
    if (closedAt > 0) yield chunk.subarray(0, closedAt);
    yield field.body;
    yield chunk.subarray(closedAt);
  }
}
