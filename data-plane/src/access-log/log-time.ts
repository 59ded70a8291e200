/**
 * The time of an access-log line, ISO 8601 UTC with milliseconds. A busy proxy writes
 * thousands of lines within one second, so the `YYYY-MM-DDTHH:MM:SS.` part is formatted once
 * per second (through Date) and a line only adds its milliseconds: `new Date().toISOString()`
 * for every line was an object, a full format and a string each time.
 */
export class LogTime {
  #second = Number.NaN;
  #prefix = "";

  /** `2026-12-01T03:30:00.` for the epoch second `second` (Math.floor of Date.now() / 1000). */
  prefix(second: number): string {
    if (second !== this.#second) {
      this.#second = second;
      // toISOString ends `.mmmZ`: keep everything up to the dot.
      this.#prefix = new Date(second * 1000).toISOString().slice(0, -4);
    }
    return this.#prefix;
  }

  /** `ms` (epoch milliseconds, an integer as Date.now() gives) as `2026-12-01T03:30:00.123Z`. */
  format(ms: number): string {
    const second = Math.floor(ms / 1000);
    return `${this.prefix(second)}${String(ms - second * 1000).padStart(3, "0")}Z`;
  }
}
