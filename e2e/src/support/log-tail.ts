/** The last lines a process wrote, kept so a failure can show what the process said. */
export class LogTail {
  private readonly lines: string[] = [];
  private partial = "";
  private readonly listeners = new Set<(line: string) => void>();

  /** @param capacity lines kept; default 200. */
  constructor(private readonly capacity = 200) {}

  push(chunk: string): void {
    const text = this.partial + chunk;
    const parts = text.split("\n");
    this.partial = parts.pop() ?? "";
    for (const line of parts) this.add(line);
  }

  /** The last `count` lines (default 40), the unfinished one included. */
  text(count = 40): string {
    const all = this.partial === "" ? this.lines : [...this.lines, this.partial];
    return all.slice(-count).join("\n");
  }

  /**
   * Calls `listener` with every complete line from now on, kept or not: for a caller that must
   * see a line the tail may already have dropped (a benchmark timing what a process logs).
   * Returns the function that stops it.
   */
  onLine(listener: (line: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Starts counting the lines that contain `needle`, however many the tail drops; returns a
   * function that reads the count so far (for asserting how many lines a burst produced).
   */
  count(needle: string): () => number {
    let seen = 0;
    this.onLine((line) => {
      if (line.includes(needle)) seen++;
    });
    return () => seen;
  }

  /** Every kept line that contains `needle`. */
  grep(needle: string): string[] {
    return this.lines.filter((line) => line.includes(needle));
  }

  private add(line: string): void {
    for (const listener of this.listeners) listener(line);
    this.lines.push(line);
    if (this.lines.length > this.capacity) this.lines.shift();
  }
}
