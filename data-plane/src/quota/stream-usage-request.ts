import type { IncomingHttpHeaders } from "node:http";

/**
 * Largest request body read to add include_usage (route usage.injectStreamUsage). A chat
 * request is a few kilobytes to a few hundred (long contexts); a bigger body, or one that is not
 * application/json, passes untouched, so the option never makes the gateway hold large uploads
 * in memory. A body of unknown length is read as it arrives and passed on as a stream once it
 * grows past this (request-body.ts).
 */
export const STREAM_USAGE_BODY_LIMIT = 1024 * 1024;

/**
 * Whether a request's body may be read and rewritten: JSON, and either declared within the
 * limit or of unknown length (chunked, or HTTP/2 without content-length), which only a read can
 * tell. Checking the framing alone would let a client escape its token budget by how it sends.
 */
export function streamUsageCandidate(headers: IncomingHttpHeaders): boolean {
  if (headers["transfer-encoding"] === undefined) {
    const declared = Number(headers["content-length"]);
    if (!Number.isSafeInteger(declared) || declared <= 0 || declared > STREAM_USAGE_BODY_LIMIT)
      return false;
  }
  const type = headers["content-type"];
  return type !== undefined && /^application\/json\s*(;|$)/i.test(type);
}

const INCLUDE_USAGE = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * Adds `stream_options.include_usage: true` to an OpenAI-style request that streams
 * (`"stream": true`), so its stream ends with a usage chunk the token budget can debit; the
 * client did not ask for that chunk, so it is kept from the client's stream.
 * Undefined when the body is left as it is: not a JSON object, not streaming, or the client
 * already asked for usage (then it gets the chunk, as it asked). The body is re-serialized only
 * when the client sent stream_options of its own (merged); otherwise the field is spliced in
 * front of the client's bytes, which stay as they were (numbers beyond 2^53 included).
 */
export function injectStreamUsage(body: Buffer): Buffer | undefined {
  let request: unknown;
  try {
    request = JSON.parse(body.toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) return undefined;
  const fields = request as Record<string, unknown>;
  if (fields.stream !== true) return undefined;
  const options = fields.stream_options;
  if (options === undefined) {
    const open = body.indexOf("{");
    return Buffer.concat([body.subarray(0, open + 1), INCLUDE_USAGE, body.subarray(open + 1)]);
  }
  if (options !== null && (typeof options !== "object" || Array.isArray(options))) return undefined;
  const asked = options as Record<string, unknown> | null;
  if (asked?.include_usage === true) return undefined;
  const rewritten = { ...fields, stream_options: { ...asked, include_usage: true } };
  return Buffer.from(JSON.stringify(rewritten));
}
