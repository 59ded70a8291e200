/**
 * Runs a rollout's checks and endings one at a time. A person's promote or abort waits for a
 * check in progress and then runs; the periodic check skips its turn while anything runs.
 * Before, both shared one busy flag, and a promote or abort that came while the 500 ms check
 * was reading the store failed with "the rollout is being ended already" though nothing was
 * ending it.
 */
export class OneAtATime {
  #tail: Promise<unknown> = Promise.resolve();
  #running = 0;

  /** Something runs or waits to run. */
  get busy(): boolean {
    return this.#running > 0;
  }

  /** Runs `work` after everything queued before it; settles as it does. */
  run<T>(work: () => Promise<T>): Promise<T> {
    this.#running++;
    const result = this.#tail.then(work).finally(() => {
      this.#running--;
    });
    // The next waits for this one however it ends.
    this.#tail = result.catch(() => undefined);
    return result;
  }

  /** Runs `work` only if nothing runs or waits; undefined when it skipped. */
  runUnlessBusy<T>(work: () => Promise<T>): Promise<T> | undefined {
    return this.busy ? undefined : this.run(work);
  }
}
