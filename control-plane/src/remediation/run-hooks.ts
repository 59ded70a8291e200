import type { ActionResult } from "./action-result.js";
import type { callWebhook } from "./call-webhook.js";
import { expandCommand, templateValues } from "./command-template.js";
import type { RemediationPolicy } from "./remediation-policy.js";
import type { runCommand } from "./run-command.js";

/** The actions the runner takes; tests may replace them. */
export interface RemediationActions {
  runCommand: typeof runCommand;
  callWebhook: typeof callWebhook;
}

/** "command /usr/bin/systemctl and webhook": what an attempt runs, for its journal event. */
export function hookSummary(policy: RemediationPolicy): string {
  return [
    policy.command !== undefined ? `command ${policy.command[0]}` : undefined,
    policy.webhookUrl !== undefined ? "webhook" : undefined,
  ]
    .filter((part) => part !== undefined)
    .join(" and ");
}

/**
 * Runs the policy's command, then its webhook (unless the term ended meanwhile); the outcome is
 * the first that is not ok, the evidence both.
 */
export async function runHooks(
  actions: RemediationActions,
  policy: RemediationPolicy,
  upstream: string,
  address: string,
  evidence: string,
  signal: AbortSignal,
): Promise<ActionResult> {
  const values = templateValues(address);
  const results: ActionResult[] = [];
  if (policy.command !== undefined) {
    results.push(
      await actions.runCommand(expandCommand(policy.command, values), {
        timeoutMs: policy.timeoutMs,
        env: {
          CLAWGATE_REMEDIATION_UPSTREAM: upstream,
          CLAWGATE_REMEDIATION_NODE: address,
        },
        signal,
      }),
    );
  }
  if (policy.webhookUrl !== undefined && !signal.aborted) {
    results.push(
      await actions.callWebhook(
        policy.webhookUrl,
        { upstream, node: address, host: values.host, port: Number(values.port), evidence },
        { timeoutMs: policy.timeoutMs, signal },
      ),
    );
  }
  const failed = results.find((result) => result.outcome !== "ok");
  return {
    outcome: failed?.outcome ?? "ok",
    evidence: results.map((result) => result.evidence).join("; "),
  };
}
