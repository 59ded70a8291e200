import type { UsageCounts } from "./usage-counts.js";

/**
 * What an event stream that ended without its final usage is charged. OpenAI-style streams
 * report usage only in their last chunk, so a client that cuts each stream just before it (or
 * an upstream that breaks there, or one that never sends usage) would otherwise read whole
 * answers free. The rule, in tokens:
 *
 *   output = max(ceil(content bytes / 4), content events, output the stream reported)
 *   input  = the input the stream reported (Anthropic's message_start), else
 *            min(ceil(request body bytes / 4), PROMPT_TOKENS_MAX)
 *
 * "Content" is the text a model generated, as the known stream formats carry it: chat deltas
 * (`choices[].delta.content`, reasoning, refusal, tool-call arguments), legacy completions'
 * `choices[].text`, the Responses API's `*.delta` events, Anthropic's `content_block_delta`
 * (text, thinking, partial_json), counted in UTF-8 bytes of the decoded strings; a `data:` line
 * too long to parse counts its own bytes. A token is about 4 bytes of English text, and every
 * chunk carries at least one token, so short deltas are counted by events. The request body's
 * size is the one already known (Content-Length, or the bytes counted as it streamed), never a
 * second read of it; a body of unknown size adds nothing.
 */

/** The largest prompt estimate: a long context window. A body past it is mostly images or files, which cost far fewer tokens than bytes / 4. */
export const PROMPT_TOKENS_MAX = 128_000;

/** About how many bytes of text make one token. */
const BYTES_PER_TOKEN = 4;

/** The content an event stream carried, as far as it came. */
export class ContentTally {
  bytes = 0;
  /** `data:` events that carried content. */
  events = 0;

  add(bytes: number): void {
    if (bytes <= 0) return;
    this.bytes += bytes;
    this.events++;
  }
}

/** The prompt estimate for a request body of `bodyBytes` (undefined: not known, nothing). */
export function promptTokenEstimate(bodyBytes: number | undefined): number {
  if (bodyBytes === undefined || !(bodyBytes > 0)) return 0;
  return Math.min(Math.ceil(bodyBytes / BYTES_PER_TOKEN), PROMPT_TOKENS_MAX);
}

/** The charge of a stream whose final usage never came (the rule above). */
export function estimatedStreamTokens(
  counts: UsageCounts,
  content: ContentTally,
  promptTokens: number,
): number {
  const output = Math.max(
    Math.ceil(content.bytes / BYTES_PER_TOKEN),
    content.events,
    counts.output,
  );
  const input = counts.input > 0 ? counts.input : promptTokens;
  return input + output;
}

/** Keys of a delta object whose string values are generated text. */
const TEXT_KEYS = [
  "content",
  "text",
  "reasoning_content",
  "reasoning",
  "refusal",
  "thinking",
  "partial_json",
] as const;

/** UTF-8 bytes of generated text in one parsed SSE event, in any of the known formats. */
export function contentBytesOf(event: Record<string, unknown>): number {
  const delta = event.delta;
  // The Responses API: response.output_text.delta, response.function_call_arguments.delta...
  if (typeof delta === "string") return Buffer.byteLength(delta);
  // Anthropic's content_block_delta (its message_delta's delta holds only the stop reason).
  let bytes = isObject(delta) ? deltaBytes(delta) : 0;
  const choices = event.choices;
  if (Array.isArray(choices)) {
    for (const choice of choices) {
      if (!isObject(choice)) continue;
      if (isObject(choice.delta)) bytes += deltaBytes(choice.delta);
      // Legacy completions stream their text on the choice itself.
      if (typeof choice.text === "string") bytes += Buffer.byteLength(choice.text);
    }
  }
  return bytes;
}

function deltaBytes(delta: Record<string, unknown>): number {
  let bytes = 0;
  for (const key of TEXT_KEYS) {
    const value = delta[key];
    if (typeof value === "string") bytes += Buffer.byteLength(value);
  }
  const calls = delta.tool_calls;
  if (Array.isArray(calls)) {
    for (const call of calls) {
      const args = isObject(call) && isObject(call.function) ? call.function.arguments : undefined;
      if (typeof args === "string") bytes += Buffer.byteLength(args);
    }
  }
  return bytes;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null;
}
