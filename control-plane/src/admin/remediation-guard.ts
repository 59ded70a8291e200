import type { UpstreamDocument } from "@clawgate/proto";
import type { Caller } from "../auth/roles.js";
import {
  type RemediationAllowlist,
  refusedRemediation,
} from "../remediation/remediation-allowlist.js";
import { type ClawgateError, clawgateError } from "../resources/errors.js";
import type { VettedChange } from "../resources/vetted-changes.js";

/**
 * A write's check of upstreams' `remediation`, for ApplyOptions.vet. A remediation command runs
 * on the control plane's host as its user, so creating, changing or removing one is an admin's
 * act, not an editor's (who could otherwise become admin through it): an editor's write that
 * touches it is refused with 403 naming the field; its other changes to the upstream are fine.
 * Whoever writes it, a new or changed remediation must name only what the control plane's
 * settings allow (400 naming the setting). Deleting a whole upstream takes its hook with it and
 * needs no more than deleting any upstream. A remediation left as it is is not judged again:
 * an upgrade that leaves stored hooks outside the allowlist does not block other edits.
 */
export function remediationGuard(
  caller: Caller | undefined,
  allow: RemediationAllowlist,
): (changes: readonly VettedChange[]) => ClawgateError | undefined {
  return (changes) => {
    for (const change of changes) {
      if (change.kind !== "upstreams" || change.after === undefined) continue;
      const before = (change.before as UpstreamDocument | undefined)?.remediation;
      const after = (change.after as UpstreamDocument).remediation;
      if (JSON.stringify(before) === JSON.stringify(after)) continue;
      const how = before === undefined ? "create" : after === undefined ? "remove" : "change";
      // No caller: the admin API runs without tokens (tests only; main.ts always has them).
      if (caller !== undefined && caller.role !== "admin") {
        return clawgateError(
          "CLAWGATE_FORBIDDEN",
          `upstreams/${change.name}: remediation may be created, changed or removed only by role admin (it runs commands on the control plane's host); token ${caller.name} has role ${caller.role}, so this write may not ${how} it`,
          [
            {
              path: "remediation",
              message: "needs role admin",
              kind: "upstreams",
              name: change.name,
            },
          ],
        );
      }
      const refusal = refusedRemediation(after, allow);
      if (refusal !== undefined) {
        return clawgateError(
          "CLAWGATE_INVALID_RESOURCE",
          `upstreams/${change.name}: ${refusal.path}: ${refusal.message}`,
          [{ ...refusal, kind: "upstreams", name: change.name }],
        );
      }
    }
    return undefined;
  };
}
