import type { Logger } from "pino";
import { type RemediationAllowlist, refusedRemediation } from "./remediation-allowlist.js";
import type { RemediationPolicy } from "./remediation-policy.js";

export interface HookRefusalsOptions {
  allow: RemediationAllowlist;
  /** Run commands even when this process runs as root (remediationAllowRoot). */
  allowRoot: boolean | undefined;
  /** Whether this process runs as root; default from process.getuid(). */
  runningAsRoot: boolean | undefined;
  logger: Pick<Logger, "error"> | undefined;
}

/**
 * Whether the control plane's settings refuse an upstream's hook: not on the allowlist (a config
 * stored before the allowlist existed), or a command while running as root. Logged once per
 * upstream and reason, not at every eviction.
 */
export class HookRefusals {
  readonly #options: HookRefusalsOptions;
  readonly #refusedOnce = new Set<string>();

  constructor(options: HookRefusalsOptions) {
    this.#options = options;
  }

  refused(upstream: string, policy: RemediationPolicy): boolean {
    const refusal = refusedRemediation(policy, this.#options.allow);
    const asRoot =
      policy.command !== undefined &&
      (this.#options.runningAsRoot ?? process.getuid?.() === 0) &&
      this.#options.allowRoot !== true;
    const reason =
      refusal !== undefined
        ? `${refusal.path}: ${refusal.message}`
        : asRoot
          ? "the control plane runs as root and remediationAllowRoot (CLAWGATE_REMEDIATION_ALLOW_ROOT) is false: run it as an unprivileged user, or allow root"
          : undefined;
    if (reason === undefined) return false;
    const once = `${upstream}\u0000${reason}`;
    if (!this.#refusedOnce.has(once)) {
      this.#refusedOnce.add(once);
      this.#options.logger?.error(
        { upstream, reason },
        "upstream's remediation is refused by the control plane's settings; its evicted nodes are not remediated",
      );
    }
    return true;
  }
}
