/**
 * Keeps the final usage chunk of an OpenAI-style stream from a client that did not ask for it
 * (the gateway asked, for the token budget: stream-usage-request.ts). The stream is passed on an
 * event at a time: bytes are held only until the blank line that ends their event, and an event
 * that grows past MAX_HELD_BYTES (a long content delta, never a usage chunk) is passed on as it
 * comes. Dropped: an event whose data is a JSON object with `choices: []` and a `usage` object,
 * which is what OpenAI sends when include_usage is set; every other byte reaches the client.
 */
export const MAX_HELD_BYTES = 16 * 1024;

const LF = 0x0a;
const CR = 0x0d;

export class UsageChunkFilter {
  #held: Buffer = Buffer.alloc(0);
  /** The event being passed grew too big to hold: pass on until its end. */
  #passing = false;
  /** The previous byte passed was a line end (so a following LF ends the event). */
  #lineEnded = false;

  /** What of `chunk` (with what was held) goes to the client now. */
  push(chunk: Buffer): Buffer {
    const out: Buffer[] = [];
    let data = this.#held.length === 0 ? chunk : Buffer.concat([this.#held, chunk]);
    this.#held = Buffer.alloc(0);
    for (;;) {
      const end = this.#eventEnd(data);
      if (end < 0) break;
      const event = data.subarray(0, end);
      if (this.#passing) this.#passing = false;
      else if (isUsageChunk(event)) {
        data = data.subarray(end);
        continue;
      }
      out.push(event);
      data = data.subarray(end);
    }
    if (this.#passing || data.length > MAX_HELD_BYTES) {
      this.#passing = true;
      this.#lineEnded = data.length > 0 && data[data.length - 1] === LF;
      out.push(data);
    } else {
      this.#held = Buffer.from(data);
    }
    return out.length === 1 ? (out[0] as Buffer) : Buffer.concat(out);
  }

  /** The stream ended: whatever was held (an event without its blank line) goes on. */
  end(): Buffer {
    const rest = this.#held;
    this.#held = Buffer.alloc(0);
    return rest;
  }

  /** Offset just past the blank line ending the first event in `data`; -1 when none does. */
  #eventEnd(data: Buffer): number {
    // A pass-through event may have ended its last line in the previous chunk.
    if (this.#passing && this.#lineEnded) {
      this.#lineEnded = false;
      if (data[0] === LF) return 1;
      if (data[0] === CR && data[1] === LF) return 2;
    }
    for (let i = data.indexOf(LF); i >= 0; i = data.indexOf(LF, i + 1)) {
      if (data[i + 1] === LF) return i + 2;
      if (data[i + 1] === CR && data[i + 2] === LF) return i + 3;
    }
    return -1;
  }
}

function isUsageChunk(event: Buffer): boolean {
  const text = event.toString("utf8");
  if (!text.includes('"usage"')) return false;
  const data = text
    .split(/\r?\n/)
    .filter((line) => line.startsWith("data:"))
    .map((line) => line.slice(5).trimStart())
    .join("\n");
  try {
    const chunk = JSON.parse(data) as { choices?: unknown; usage?: unknown };
    return (
      Array.isArray(chunk.choices) &&
      chunk.choices.length === 0 &&
      typeof chunk.usage === "object" &&
      chunk.usage !== null
    );
  } catch {
    return false;
  }
}
