import { StringDecoder } from "node:string_decoder";
import { JsonUsageScanner } from "./json-usage-scanner.js";
import { ContentTally, contentBytesOf, estimatedStreamTokens } from "./stream-usage-estimate.js";
import { emptyCounts, readUsage, totalOf, type UsageCounts } from "./usage-counts.js";

/**
 * Reads the token usage a model response reports while its bytes pass to the client, never
 * holding the body: OpenAI- and Anthropic-style, JSON and SSE (../shared/notes/model-usage.md).
 *
 * - JSON: a small tokenizer follows strings and nesting and keeps only the value of the
 *   top-level `usage` key (cut at USAGE_BYTES), parsed when it closes.
 * - SSE: lines are split as they come; only a `data:` line that mentions "usage" is parsed, and
 *   a `data:` line longer than LINE_BYTES (a big content delta, a whole response) goes through
 *   the same streaming tokenizer as JSON bodies, without being kept.
 *   OpenAI sends the totals in one last chunk (`usage`, or `response.usage` on the Responses
 *   API's `response.completed`); Anthropic sends input tokens in `message_start` and the
 *   running output total in each `message_delta` (the latest one counts, never their sum).
 *   The generated text each event carries is tallied too: a stream that ends without its final
 *   usage (cut by the client or the upstream, or never sent) is charged an estimate from it
 *   (stream-usage-estimate.ts), never 0.
 */
export interface UsageScanner {
  push(chunk: Buffer): void;
  /**
   * What the response costs so far: the usage it reported; for an event stream without its
   * final usage, the estimate, `promptTokens` standing for an input the stream did not report.
   */
  tokens(promptTokens: number): number;
}

/** Longest SSE line kept whole; a final usage chunk is usually well under this. */
const LINE_BYTES = 16 * 1024;
/** Where an SSE event may carry usage besides its top level. */
const EVENT_PARENTS: ReadonlySet<string> = new Set(["response", "message"]);
/** Of those, where usage is only a first count: Anthropic's message_start (input, output 1). */
const PARTIAL_PARENTS: ReadonlySet<string> = new Set(["message"]);

/** A scanner for the response's content type, or undefined when it cannot carry usage. */
export function usageScannerFor(contentType: string | undefined): UsageScanner | undefined {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "text/event-stream") return new SseUsageScanner();
  if (type === "application/json" || type.endsWith("+json")) return new JsonBodyScanner();
  return undefined;
}

class SseUsageScanner implements UsageScanner {
  readonly #counts: UsageCounts = emptyCounts();
  readonly #content = new ContentTally();
  #line = "";
  /**
   * The current line outgrew LINE_BYTES: a `data:` line goes on through a streaming scanner
   * (the Responses API's response.completed carries the whole response, output and all, with
   * its usage), any other line is dropped up to the newline. Either way it is not kept.
   */
  #long: JsonUsageScanner | "skip" | undefined;
  // A character split across chunks is decoded whole.
  readonly #decoder = new StringDecoder("utf8");

  push(chunk: Buffer): void {
    const text = this.#decoder.write(chunk);
    let start = 0;
    for (;;) {
      const newline = text.indexOf("\n", start);
      const piece = newline < 0 ? text.slice(start) : text.slice(start, newline);
      if (this.#long instanceof JsonUsageScanner) {
        this.#long.pushText(piece);
        this.#content.bytes += Buffer.byteLength(piece);
      } else if (this.#long === undefined) {
        if (this.#line.length + piece.length > LINE_BYTES) {
          const line = this.#line + piece;
          this.#line = "";
          if (line.startsWith("data:")) {
            this.#long = new JsonUsageScanner(this.#counts, EVENT_PARENTS, PARTIAL_PARENTS);
            this.#long.pushText(line.slice(5));
            // Too long to parse: it counts as content, all of it (a big delta is mostly text).
            this.#content.add(Buffer.byteLength(line) - 5);
          } else {
            this.#long = "skip";
          }
        } else {
          this.#line += piece;
        }
      }
      if (newline < 0) return;
      if (this.#long === undefined) this.#onLine(this.#line);
      this.#line = "";
      this.#long = undefined;
      start = newline + 1;
    }
  }

  tokens(promptTokens: number): number {
    if (this.#counts.final) return totalOf(this.#counts);
    return estimatedStreamTokens(this.#counts, this.#content, promptTokens);
  }

  #onLine(raw: string): void {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (!line.startsWith("data:")) return;
    // Only events that may carry usage or generated text are parsed ("[DONE]", pings are not).
    if (!line.includes('"usage"') && !line.includes('"delta"') && !line.includes('"text"')) {
      return;
    }
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(line.slice(5));
    } catch {
      return;
    }
    if (typeof event !== "object" || event === null) return;
    this.#content.add(contentBytesOf(event));
    readUsage(event.usage, this.#counts);
    const message = event.message as Record<string, unknown> | undefined;
    readUsage(message?.usage, this.#counts, false);
    const response = event.response as Record<string, unknown> | undefined;
    readUsage(response?.usage, this.#counts);
  }
}

/** A JSON body: only its top-level `usage` counts; without one it costs nothing. */
class JsonBodyScanner implements UsageScanner {
  readonly #counts: UsageCounts = emptyCounts();
  readonly #scanner = new JsonUsageScanner(this.#counts);
  readonly #decoder = new StringDecoder("utf8");

  push(chunk: Buffer): void {
    this.#scanner.pushText(this.#decoder.write(chunk));
  }

  tokens(_promptTokens: number): number {
    return totalOf(this.#counts);
  }
}
