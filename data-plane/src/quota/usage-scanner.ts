import { StringDecoder } from "node:string_decoder";

/**
 * Reads the token usage a model response reports while its bytes pass to the client, never
 * holding the body: OpenAI- and Anthropic-style, JSON and SSE (../shared/notes/model-usage.md).
 *
 * - JSON: a small tokenizer follows strings and nesting and keeps only the value of the
 *   top-level `usage` key (cut at USAGE_BYTES), parsed when it closes.
 * - SSE: lines are split as they come; only a `data:` line that mentions "usage" is parsed, and
 *   a line longer than LINE_BYTES (a big content delta) is skipped without being kept.
 *   OpenAI sends the totals in one last chunk (`usage`, or `response.usage` on the Responses
 *   API's `response.completed`); Anthropic sends input tokens in `message_start` and the
 *   running output total in each `message_delta` (the latest one counts, never their sum).
 */
export interface UsageScanner {
  push(chunk: Buffer): void;
  /** Tokens seen so far: after the end the response's total, after a cut what was seen. */
  tokens(): number;
}

/** Longest `usage` object kept from a JSON body; real ones are under 300 bytes. */
const USAGE_BYTES = 4096;
/** Longest SSE line kept; a final usage chunk is well under this. */
const LINE_BYTES = 16 * 1024;

/** A scanner for the response's content type, or undefined when it cannot carry usage. */
export function usageScannerFor(contentType: string | undefined): UsageScanner | undefined {
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (type === "text/event-stream") return new SseUsageScanner();
  if (type === "application/json" || type.endsWith("+json")) return new JsonUsageScanner();
  return undefined;
}

interface UsageCounts {
  input: number;
  output: number;
  /** A total the provider stated; wins over input + output. */
  total: number | undefined;
}

/** Reads one usage object of either style into `into`; Anthropic's output is a running total. */
function readUsage(usage: unknown, into: UsageCounts): void {
  if (typeof usage !== "object" || usage === null) return;
  const u = usage as Record<string, unknown>;
  const n = (key: string) => (typeof u[key] === "number" && u[key] >= 0 ? (u[key] as number) : 0);
  if (typeof u.total_tokens === "number") {
    into.total = n("total_tokens");
    return;
  }
  const input =
    n("prompt_tokens") +
    n("input_tokens") +
    n("cache_creation_input_tokens") +
    n("cache_read_input_tokens");
  if (input > 0) into.input = input;
  const output = n("completion_tokens") + n("output_tokens");
  if (output > 0) into.output = output;
}

function total(counts: UsageCounts): number {
  return counts.total ?? counts.input + counts.output;
}

class SseUsageScanner implements UsageScanner {
  readonly #counts: UsageCounts = { input: 0, output: 0, total: undefined };
  #line = "";
  /** The current line outgrew LINE_BYTES: the rest of it is dropped up to the newline. */
  #skipping = false;
  // A character split across chunks is decoded whole.
  readonly #decoder = new StringDecoder("utf8");

  push(chunk: Buffer): void {
    const text = this.#decoder.write(chunk);
    let start = 0;
    for (;;) {
      const newline = text.indexOf("\n", start);
      const piece = newline < 0 ? text.slice(start) : text.slice(start, newline);
      if (!this.#skipping) {
        if (this.#line.length + piece.length > LINE_BYTES) {
          this.#skipping = true;
          this.#line = "";
        } else {
          this.#line += piece;
        }
      }
      if (newline < 0) return;
      if (!this.#skipping) this.#onLine(this.#line);
      this.#line = "";
      this.#skipping = false;
      start = newline + 1;
    }
  }

  tokens(): number {
    return total(this.#counts);
  }

  #onLine(raw: string): void {
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (!line.startsWith("data:") || !line.includes('"usage"')) return;
    let event: Record<string, unknown>;
    try {
      event = JSON.parse(line.slice(5));
    } catch {
      return;
    }
    if (typeof event !== "object" || event === null) return;
    readUsage(event.usage, this.#counts);
    const message = event.message as Record<string, unknown> | undefined;
    readUsage(message?.usage, this.#counts);
    const response = event.response as Record<string, unknown> | undefined;
    readUsage(response?.usage, this.#counts);
  }
}

class JsonUsageScanner implements UsageScanner {
  readonly #counts: UsageCounts = { input: 0, output: 0, total: undefined };
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** The last top-level key read (depth 1), kept only while it is short. */
  #key = "";
  #readingKey = false;
  /** The top-level `usage` value being captured, from its first byte; undefined otherwise. */
  #capture: string | undefined;
  #captureDepth = 0;
  #done = false;
  readonly #decoder = new StringDecoder("utf8");

  push(chunk: Buffer): void {
    if (this.#done) return;
    const text = this.#decoder.write(chunk);
    for (let i = 0; i < text.length; i++) {
      const c = text[i]!;
      if (this.#capture !== undefined) {
        this.#capture += c;
        if (this.#capture.length > USAGE_BYTES) {
          this.#capture = undefined;
          this.#done = true;
          return;
        }
      }
      if (this.#inString) {
        if (this.#escaped) this.#escaped = false;
        else if (c === "\\") this.#escaped = true;
        else if (c === '"') this.#inString = false;
        else if (this.#readingKey && this.#key.length < 16) this.#key += c;
        continue;
      }
      switch (c) {
        case '"':
          this.#inString = true;
          // A string at depth 1 outside a value being captured may be a key: keep it.
          this.#readingKey = this.#depth === 1 && this.#capture === undefined;
          if (this.#readingKey) this.#key = "";
          break;
        case ":":
          if (this.#depth === 1 && this.#key === "usage" && this.#capture === undefined) {
            this.#capture = "";
            this.#captureDepth = this.#depth;
          }
          break;
        case "{":
        case "[":
          this.#depth++;
          break;
        case "}":
        case "]":
          this.#depth--;
          if (this.#capture !== undefined && this.#depth === this.#captureDepth) this.#finish();
          break;
        case ",":
          if (this.#depth === 1) this.#key = "";
          break;
      }
    }
  }

  tokens(): number {
    return total(this.#counts);
  }

  #finish(): void {
    const captured = this.#capture ?? "";
    this.#capture = undefined;
    this.#key = "";
    try {
      readUsage(JSON.parse(captured), this.#counts);
    } catch {
      // Not an object after all; nothing to count.
    }
  }
}
