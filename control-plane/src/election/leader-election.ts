/**
 * Decides which control-plane replica runs singleton work (remediation). `onChange` fires on
 * every gain and loss; a replica that cannot prove its claim (lost its etcd session) loses.
 */
export interface LeaderElection {
  /** Starts campaigning; resolves once the campaign is under way, not when it is won. */
  start(): Promise<void>;
  /** Gives up leadership (if held) and stops campaigning. */
  stop(): Promise<void>;
  isLeader(): boolean;
  /** Calls `listener` with the new value after each change; returns the unsubscribe. */
  onChange(listener: (leader: boolean) => void): () => void;
}

/** Shared listener bookkeeping of the implementations. */
export class LeadershipState {
  #leader = false;
  readonly #listeners = new Set<(leader: boolean) => void>();

  get leader(): boolean {
    return this.#leader;
  }

  set(leader: boolean): void {
    if (leader === this.#leader) return;
    this.#leader = leader;
    for (const listener of this.#listeners) {
      try {
        listener(leader);
      } catch {
        // One listener's failure must not keep the others from hearing of the change.
      }
    }
  }

  onChange(listener: (leader: boolean) => void): () => void {
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }
}

/**
 * The election of a single-process control plane (the embedded store): it leads from start()
 * to stop(), since there is nobody to share the work with.
 */
export function alwaysLeader(): LeaderElection {
  const state = new LeadershipState();
  return {
    async start() {
      state.set(true);
    },
    async stop() {
      state.set(false);
    },
    isLeader: () => state.leader,
    onChange: (listener) => state.onChange(listener),
  };
}
