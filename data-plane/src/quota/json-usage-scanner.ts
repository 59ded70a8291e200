import { readUsage, type UsageCounts } from "./usage-counts.js";

/** Longest `usage` object kept; real ones are under 300 bytes. */
const USAGE_BYTES = 4096;
/** Keys longer than this are no key we look for: only their first bytes are kept. */
const KEY_CHARS = 16;
/** The next byte that can end or escape a string: everything else in one is skipped at once. */
const STRING_STOP = /["\\]/g;

/**
 * Follows one JSON document as text arrives and keeps only the value of a `usage` key: at the
 * top level, or one level down under a key in `parents` (the Responses API's
 * `response.usage`, Anthropic's `message.usage`). Strings and nesting are tracked so a
 * "usage" inside a string or deeper in the document does not count; each captured value is
 * cut at USAGE_BYTES and parsed when it closes. Memory is that capture and a short key, however
 * long the document: an SSE line of megabytes is read without being kept.
 */
export class JsonUsageScanner {
  readonly #counts: UsageCounts;
  readonly #parents: ReadonlySet<string>;
  readonly #partialParents: ReadonlySet<string>;
  #depth = 0;
  #inString = false;
  #escaped = false;
  /** The last key read at a depth where `usage` may count, kept only while it is short. */
  #key = "";
  #readingKey = false;
  /** The `parents` key whose object is open at depth 2; undefined otherwise. */
  #parent: string | undefined;
  /** The `usage` value being captured, from its first byte; undefined otherwise. */
  #capture: string | undefined;
  #captureDepth = 0;
  #done = false;

  /**
   * `partialParents`: those of `parents` whose usage is a first count a later event completes
   * (Anthropic's `message.usage` in message_start), not the response's final figure.
   */
  constructor(
    counts: UsageCounts,
    parents: ReadonlySet<string> = new Set(),
    partialParents: ReadonlySet<string> = new Set(),
  ) {
    this.#counts = counts;
    this.#parents = parents;
    this.#partialParents = partialParents;
  }

  pushText(text: string): void {
    if (this.#done) return;
    for (let i = 0; i < text.length; i++) {
      if (this.#inString && !this.#escaped && !this.#readingKey && this.#capture === undefined) {
        // A value string (a content delta, a long output): jump to its next quote or backslash.
        STRING_STOP.lastIndex = i;
        const stop = STRING_STOP.exec(text);
        if (stop === null) return;
        i = stop.index;
      }
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
        else if (this.#readingKey && this.#key.length < KEY_CHARS) this.#key += c;
        continue;
      }
      switch (c) {
        case '"':
          this.#inString = true;
          // A string where usage may count, outside a value being captured, may be a key.
          this.#readingKey = this.#keyDepth() && this.#capture === undefined;
          if (this.#readingKey) this.#key = "";
          break;
        case ":":
          if (this.#keyDepth() && this.#key === "usage" && this.#capture === undefined) {
            this.#capture = "";
            this.#captureDepth = this.#depth;
          }
          break;
        case "{":
        case "[":
          this.#depth++;
          if (this.#depth === 2) {
            this.#parent = c === "{" && this.#parents.has(this.#key) ? this.#key : undefined;
            this.#key = "";
          }
          break;
        case "}":
        case "]":
          this.#depth--;
          if (this.#depth === 1) this.#parent = undefined;
          if (this.#capture !== undefined && this.#depth === this.#captureDepth) this.#finish();
          break;
        case ",":
          if (this.#keyDepth()) this.#key = "";
          break;
      }
    }
  }

  /** At the top level, or inside a `parents` object: where a `usage` key counts. */
  #keyDepth(): boolean {
    return this.#depth === 1 || (this.#depth === 2 && this.#parent !== undefined);
  }

  #finish(): void {
    const captured = this.#capture ?? "";
    const final = this.#parent === undefined || !this.#partialParents.has(this.#parent);
    this.#capture = undefined;
    this.#key = "";
    try {
      readUsage(JSON.parse(captured), this.#counts, final);
    } catch {
      // Not an object after all; nothing to count.
    }
  }
}
