import { once } from "node:events";
import { Writable } from "node:stream";

/**
 * A stream an access-log sink writes to in tests (accessLogSinkOn): the lines parsed as they
 * come, with a wait for the line of a request id.
 */
export class AccessLogLines extends Writable {
  readonly parsed: Record<string, unknown>[] = [];

  override _write(chunk: Buffer, _encoding: string, done: () => void): void {
    for (const line of String(chunk).split("\n"))
      if (line !== "") this.parsed.push(JSON.parse(line));
    this.emit("line");
    done();
  }

  async of(requestId: string): Promise<Record<string, unknown>> {
    for (;;) {
      const found = this.parsed.find((l) => l.requestId === requestId);
      if (found !== undefined) return found;
      await once(this, "line");
    }
  }
}
