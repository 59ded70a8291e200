import type { UpstreamDocument as Upstream } from "@clawgate/proto";

/** An upstream's remediation settings, defaults filled in. */
export type RemediationPolicy = NonNullable<Upstream["remediation"]>;

/** Where the runner reads each upstream's remediation settings at attempt time. */
export interface RemediationPolicySource {
  /** Undefined when the upstream is gone or names no remediation. */
  remediation(upstream: string): Promise<RemediationPolicy | undefined>;
}
