/** The last lines a process wrote, kept so a failure can show what the process said. */
export class LogTail {
  private readonly lines: string[] = [];
  private partial = "";
  /** Needles being counted, with how many lines held each since `count` began watching it. */
  private readonly counts = new Map<string, number>();

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

  /** Every kept line that contains `needle`. */
  grep(needle: string): string[] {
    return this.lines.filter((line) => line.includes(needle));
  }

  /**
   * Starts counting the lines that contain `needle`, however many the tail drops; returns a
   * function that reads the count so far (for asserting how many lines a burst produced).
   */
  count(needle: string): () => number {
    this.counts.set(needle, this.counts.get(needle) ?? 0);
    return () => this.counts.get(needle) ?? 0;
  }

  private add(line: string): void {
    for (const [needle, seen] of this.counts) {
      if (line.includes(needle)) this.counts.set(needle, seen + 1);
    }
    this.lines.push(line);
    if (this.lines.length > this.capacity) this.lines.shift();
  }
}
