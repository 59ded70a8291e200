/**
 * The pause between "not ready" and the drain. Kubernetes removes a pod's endpoint while it
 * delivers SIGTERM, and kube-proxy and load balancers take seconds to stop sending to it; a
 * proxy that stopped accepting at once would refuse the clients that connect in that window.
 * `skip()` ends the pause early, for an operator who sends a second SIGTERM.
 */
export class DrainDelay {
  #end: (() => void) | undefined;

  /** True while `wait` is pausing. */
  get waiting(): boolean {
    return this.#end !== undefined;
  }

  /** Resolves after `ms`, or at once when `ms` is 0 or `skip()` is called meanwhile. */
  wait(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => this.#end?.(), ms);
      this.#end = () => {
        clearTimeout(timer);
        this.#end = undefined;
        resolve();
      };
    });
  }

  /** Ends a pause in progress; false when there is none to end. */
  skip(): boolean {
    const end = this.#end;
    if (end === undefined) return false;
    end();
    return true;
  }
}
