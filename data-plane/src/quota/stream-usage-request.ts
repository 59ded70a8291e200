import type { IncomingHttpHeaders } from "node:http";
import { JsonTopLevelScan, VALUE_TOO_LARGE } from "./json-top-level-scan.js";

/**
 * Largest request body read whole to add include_usage (route usage.injectStreamUsage). A chat
 * request is a few kilobytes to a few hundred (long contexts); a bigger one is never held: it is
 * scanned as it streams upstream and the field is added at its end (include-usage-at-end.ts),
 * so padding a body past this does not escape the token budget. A body of unknown length is
 * read as it arrives and goes that way once it grows past this (request-body.ts).
 */
export const STREAM_USAGE_BODY_LIMIT = 1024 * 1024;

/**
 * Whether a request's body may be read whole and rewritten: declared within the limit or of
 * unknown length (chunked, or HTTP/2 without content-length), which only a read can tell.
 * Checking the framing alone would let a client escape its token budget by how it sends.
 *
 * Content-Type is not looked at: FastAPI/Starlette upstreams (vLLM, SGLang, LiteLLM) parse a body
 * without one, or with any `+json` type, as JSON, and llama.cpp and Ollama ignore it, so a gate
 * on it would let `{"stream":true}` sent as text/plain stream for free. The bytes decide: a body
 * that is not a JSON object passes untouched.
 */
export function streamUsageCandidate(headers: IncomingHttpHeaders): boolean {
  if (headers["transfer-encoding"] !== undefined) return true;
  const declared = Number(headers["content-length"]);
  return Number.isSafeInteger(declared) && declared > 0 && declared <= STREAM_USAGE_BODY_LIMIT;
}

/**
 * Whether a request's body is scanned as it streams to add include_usage at its end: declared
 * larger than the limit, whatever its Content-Type (as streamUsageCandidate); one of unknown
 * length is handed over by request-body.ts once it grows past the limit.
 */
export function streamUsageScanCandidate(headers: IncomingHttpHeaders): boolean {
  return (
    headers["transfer-encoding"] === undefined &&
    Number(headers["content-length"]) > STREAM_USAGE_BODY_LIMIT
  );
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
 * A body JSON.parse refuses may still stream upstream (Python's json takes `NaN`): it is read by
 * the scanner of large bodies instead, and gets the field as they do (usageAtClose).
 */
export function injectStreamUsage(body: Buffer): Buffer | undefined {
  let request: unknown;
  try {
    // Past a UTF-8 byte order mark, which JSON.parse refuses and a parser upstream may take
    // (json-top-level-scan.ts): the splice below keeps it in front of the object.
    request = JSON.parse(body.toString("utf8", hasByteOrderMark(body) ? 3 : 0));
  } catch {
    return usageAtClose(body);
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

/**
 * A whole body read as a large one is (include-usage-at-end.ts): the field, if any, in front of
 * the `}` that closes its top-level object.
 */
function usageAtClose(body: Buffer): Buffer | undefined {
  const scan = new JsonTopLevelScan();
  const closedAt = scan.push(body);
  const field = closedAt < 0 ? undefined : includeUsageField(scan);
  if (field === undefined) return undefined;
  return Buffer.concat([body.subarray(0, closedAt), field, body.subarray(closedAt)]);
}

function hasByteOrderMark(body: Buffer): boolean {
  return body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
}

const INCLUDE_USAGE_FIELD = '"stream_options":{"include_usage":true}';

/**
 * The bytes to add in front of the `}` that closes a scanned body's top-level object, so that a
 * request that streams reports its usage; undefined when it is left as it is, on the same terms
 * as injectStreamUsage (not streaming, or the client asked for usage itself, or its
 * stream_options is neither an object nor null). A stream_options JSON.parse refuses is replaced
 * by include_usage alone. The field goes last: a parser upstream keeps
 * the last of two equal keys, so the client's own stream_options is overridden by its merge with
 * include_usage. One longer than TOP_LEVEL_VALUE_BYTES is not kept, hence not merged: replaced by
 * include_usage alone (real ones are a few dozen bytes; only a client padding it loses fields).
 */
export function includeUsageField(scan: JsonTopLevelScan): Buffer | undefined {
  if (!scan.closed || !scan.streams) return undefined;
  const field = mergedStreamOptions(scan.streamOptions);
  if (field === undefined) return undefined;
  return Buffer.from(scan.hasMembers ? `,${field}` : field);
}

function mergedStreamOptions(raw: Buffer | typeof VALUE_TOO_LARGE | undefined): string | undefined {
  if (raw === undefined || raw === VALUE_TOO_LARGE) return INCLUDE_USAGE_FIELD;
  let options: unknown;
  try {
    options = JSON.parse(raw.toString("utf8"));
  } catch {
    // A parser upstream may take what JSON.parse refuses (Python's json takes NaN), and then
    // stream without usage: include_usage alone goes after it, and the last key wins.
    return INCLUDE_USAGE_FIELD;
  }
  if (options === null) return INCLUDE_USAGE_FIELD;
  if (typeof options !== "object" || Array.isArray(options)) return undefined;
  const asked = options as Record<string, unknown>;
  if (asked.include_usage === true) return undefined;
  return `"stream_options":${JSON.stringify({ ...asked, include_usage: true })}`;
}
