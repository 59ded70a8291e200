/**
 * At most `size` remediation hooks at once; the rest wait their turn in arrival order. A new
 * leader that finds thousands of evicted nodes (a rack gone) must not fork thousands of hooks
 * in one go: the host would choke and the hooks time out together.
 */
export class HookPool {
  readonly #size: number;
  #running = 0;
  readonly #waiting: Array<() => void> = [];

  constructor(size: number) {
    this.#size = size;
  }

  /** Hooks running now. */
  get running(): number {
    return this.#running;
  }

  /** Resolves with the release function once a slot is free. */
  async acquire(): Promise<() => void> {
    if (this.#running >= this.#size) {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
    } else {
      this.#running++;
    }
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.#waiting.shift();
      // The slot passes straight to the next in line: #running stays as it is.
      if (next !== undefined) next();
      else this.#running--;
    };
  }
}
