import type { ConfigService } from "../resources/config-service.js";
import type { RemediationPolicySource } from "./remediation-policy.js";

/** Reads remediation settings from the stored upstream documents, fresh at each attempt. */
export function configPolicySource(config: Pick<ConfigService, "get">): RemediationPolicySource {
  return {
    async remediation(upstream) {
      const result = await config.get("upstreams", upstream);
      if (result.ok) return result.resource.document.remediation;
      if (result.error.code === "CLAWGATE_NOT_FOUND") return undefined;
      throw new Error(result.error.message);
    },
  };
}
