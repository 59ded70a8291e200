import type { IncomingHttpHeaders } from "node:http";
import { JsonTopLevelScan, VALUE_TOO_LARGE } from "./json-top-level-scan.js";
import { laxTrue } from "./lax-json-match.js";

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
const INCLUDE_USAGE_ALONE = '{"include_usage":true}';

/** A request the gateway asked for usage in. */
export interface UsageRequested {
  /** What goes upstream instead of what the client sent. */
  body: Buffer;
  /**
   * The client did not ask for the usage chunk, so it is kept from the client's stream. False
   * when it may have: a truthy include_usage that is not `true` (pydantic takes `"yes"`), or a
   * stream_options too large to keep or that JSON.parse refuses, which could not be read.
   */
  stripUsage: boolean;
}

/** The merged stream_options to send (JSON text), and whether the usage chunk is the gateway's. */
interface MergedOptions {
  options: string;
  stripUsage: boolean;
}

/**
 * Adds `stream_options.include_usage: true` to an OpenAI-style request an upstream may read as
 * streaming (json-top-level-scan.ts says how loosely), so its stream ends with a usage chunk
 * the token budget can debit. Undefined when the body is left as it is: not a JSON object that
 * closes, not streaming, or the client already asked for usage (then it gets the chunk, as it
 * asked). The decision is the scanner's, as for a large body, so both paths read a body alike.
 *
 * When JSON.parse reads the body the same way (no stream_options key but in exact case), the
 * field is spliced in front of the client's bytes, which stay as they were (numbers beyond 2^53
 * included), or merged into the client's stream_options and the body re-serialized. Otherwise
 * (JSON.parse refuses `NaN`, which Python's json takes; a `Stream_Options` key Go would read)
 * it goes in front of the closing `}`, as on a large body: parsers keep the last key.
 */
export function injectStreamUsage(body: Buffer): UsageRequested | undefined {
  const scan = new JsonTopLevelScan();
  const closedAt = scan.push(body);
  if (closedAt < 0 || !scan.streams) return undefined;
  const fields = parsedObject(body);
  if (fields !== undefined && scan.streamOptions === undefined) {
    const open = body.indexOf("{");
    return {
      body: Buffer.concat([body.subarray(0, open + 1), INCLUDE_USAGE, body.subarray(open + 1)]),
      stripUsage: true,
    };
  }
  if (fields !== undefined && scan.streamOptionsExact && onlyExactOptionsKey(fields)) {
    const merged = mergedOptions(fields.stream_options, true);
    if (merged === undefined) return undefined;
    const rewritten = { ...fields, stream_options: JSON.parse(merged.options) };
    return { body: Buffer.from(JSON.stringify(rewritten)), stripUsage: merged.stripUsage };
  }
  const field = includeUsageField(scan);
  if (field === undefined) return undefined;
  return {
    body: Buffer.concat([body.subarray(0, closedAt), field.body, body.subarray(closedAt)]),
    stripUsage: field.stripUsage,
  };
}

/** The body's top-level object as JSON.parse reads it; undefined when it refuses it. */
function parsedObject(body: Buffer): Record<string, unknown> | undefined {
  let request: unknown;
  try {
    // Past a UTF-8 byte order mark, which JSON.parse refuses and a parser upstream may take
    // (json-top-level-scan.ts): the splice keeps it in front of the object.
    request = JSON.parse(body.toString("utf8", hasByteOrderMark(body) ? 3 : 0));
  } catch {
    return undefined;
  }
  if (typeof request !== "object" || request === null || Array.isArray(request)) return undefined;
  return request as Record<string, unknown>;
}

/** No key but `stream_options` itself reads as it to Go (`Stream_Options`, `stream_optİons`). */
function onlyExactOptionsKey(fields: Record<string, unknown>): boolean {
  for (const key of Object.keys(fields)) {
    if (key === "stream_options" || key.length < 14 || key.length > 16) continue;
    if (goFoldedKey(key) === "stream_options") return false;
  }
  return true;
}

/**
 * A key as Go's encoding/json compares it: the characters it folds onto ASCII letters (`ſ`,
 * `İ`, `ı`: lax-json-match.ts) replaced by them first (JavaScript lower-cases `İ` to two
 * characters), then lower case.
 */
function goFoldedKey(key: string): string {
  return key.replace(/[\u017f\u0130\u0131]/g, (c) => (c === "\u017f" ? "s" : "i")).toLowerCase();
}

function hasByteOrderMark(body: Buffer): boolean {
  return body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf;
}

/**
 * The bytes to add in front of the `}` that closes a scanned body's top-level object, so that a
 * request that streams reports its usage; undefined when it is left as it is (not streaming, or
 * the client asked for usage itself). The field goes last: a parser upstream keeps the last of
 * two equal keys, so the client's own stream_options is overridden by its merge with
 * include_usage. One longer than TOP_LEVEL_VALUE_BYTES is not kept, hence not merged: replaced by
 * include_usage alone (real ones are a few dozen bytes; only a client padding it loses fields);
 * so is one JSON.parse refuses, which a parser upstream may take.
 */
export function includeUsageField(
  scan: JsonTopLevelScan,
): { body: Buffer; stripUsage: boolean } | undefined {
  if (!scan.closed || !scan.streams) return undefined;
  const merged = mergedStreamOptions(scan.streamOptions, scan.streamOptionsExact);
  if (merged === undefined) return undefined;
  const field = `"stream_options":${merged.options}`;
  return {
    body: Buffer.from(scan.hasMembers ? `,${field}` : field),
    stripUsage: merged.stripUsage,
  };
}

function mergedStreamOptions(
  raw: Buffer | typeof VALUE_TOO_LARGE | undefined,
  exact: boolean,
): MergedOptions | undefined {
  if (raw === undefined) return { options: INCLUDE_USAGE_ALONE, stripUsage: true };
  // Not read: the client may have asked for usage in it, so its chunk is left to it.
  if (raw === VALUE_TOO_LARGE) return { options: INCLUDE_USAGE_ALONE, stripUsage: false };
  let options: unknown;
  try {
    options = JSON.parse(raw.toString("utf8"));
  } catch {
    // A parser upstream may take what JSON.parse refuses (Python's json takes NaN), and then
    // stream without usage: include_usage alone goes after it, and the last key wins.
    return { options: INCLUDE_USAGE_ALONE, stripUsage: false };
  }
  return mergedOptions(options, exact);
}

/**
 * The client's stream_options (as parsed) with include_usage: true; undefined when it asked for
 * usage itself, in a key every parser reads (`exact`). One that is not an object is replaced:
 * an upstream that ignores it would otherwise stream without usage.
 */
function mergedOptions(options: unknown, exact: boolean): MergedOptions | undefined {
  if (options === null || typeof options !== "object" || Array.isArray(options))
    return { options: INCLUDE_USAGE_ALONE, stripUsage: true };
  const asked = options as Record<string, unknown>;
  if (asked.include_usage === true && exact) return undefined;
  return {
    options: JSON.stringify({ ...asked, include_usage: true }),
    stripUsage: !laxTrue(asked.include_usage),
  };
}
