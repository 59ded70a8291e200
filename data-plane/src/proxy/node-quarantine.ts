import { type Clock, systemClock } from "../clock/clock.js";

/**
 * Nodes that just refused a connection, skipped by the balancer for a short while. It bridges
 * the gap before probe-gated health notices the node is gone (seed 000 3.3: the window before
 * layer 2 reacts), so the next requests do not knock on the same closed port.
 */
export class NodeQuarantine {
  private readonly until = new Map<string, number>();

  /**
   * @param durationMs how long a refusing node is skipped; default 2000 ms.
   * @param clock time source; default `systemClock`.
   */
  constructor(
    private readonly durationMs = 2_000,
    private readonly clock: Clock = systemClock,
  ) {}

  /** False while the node is quarantined. Cheap when nothing is: one size check. */
  isUsable(_upstream: string, address: string): boolean {
    if (this.until.size === 0) return true;
    const until = this.until.get(address);
    if (until === undefined) return true;
    if (this.clock.now() < until) return false;
    this.until.delete(address);
    return true;
  }

  /** The node refused a connection on a live request. */
  reportRefused(_upstream: string, address: string): void {
    this.until.set(address, this.clock.now() + this.durationMs);
  }

  /** Forgets nodes not in the applied snapshot. */
  retain(addresses: ReadonlySet<string>): void {
    for (const address of this.until.keys())
      if (!addresses.has(address)) this.until.delete(address);
  }
}
