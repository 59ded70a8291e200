/**
 * Collects items over one event-loop turn and hands them on together at its end. The probe
 * worker posts its finished probes this way: a message across the thread boundary costs a
 * structured clone and a MessagePort event on the proxy's loop however small it is, so 20,000
 * refused probes at boot (or a rack gone dark at a 10 s interval, 2,000 results a second) were
 * 20,000 messages and callbacks where one per turn of the worker carries the same results.
 */
export class TurnBatch<T> {
  #items: T[] = [];

  /**
   * @param send receives each turn's items, in the order they were added (never empty).
   * @param later runs its callback after the current turn; default setImmediate.
   */
  constructor(
    private readonly send: (items: T[]) => void,
    private readonly later: (callback: () => void) => void = setImmediate,
  ) {}

  add(item: T): void {
    if (this.#items.length === 0) this.later(() => this.flush());
    this.#items.push(item);
  }

  /** Sends what is collected now (also what the scheduled end of turn does). */
  flush(): void {
    if (this.#items.length === 0) return;
    const items = this.#items;
    this.#items = [];
    this.send(items);
  }
}
