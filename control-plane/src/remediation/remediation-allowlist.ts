import type { RemediationPolicy } from "./remediation-policy.js";

/**
 * What the control plane's own settings let an upstream's remediation run: its owner decides
 * which executables and which webhook origins a config write may name, since a hook runs as
 * the control plane's user and a webhook is a request from inside its network.
 */
export interface RemediationAllowlist {
  /** Absolute paths a command's argv[0] may be (remediationCommands). */
  commands: readonly string[];
  /** Origins a webhookUrl may have (remediationWebhookOrigins). */
  webhookOrigins: readonly string[];
}

/** Why the allowlist refuses a remediation: the field, the setting that would allow it. */
export interface RemediationRefusal {
  /** Path of the refused field in the upstream document. */
  path: string;
  message: string;
}

/** An empty allowlist: every command and webhook refused (the default since 0.20). */
export const NOTHING_ALLOWED: RemediationAllowlist = { commands: [], webhookOrigins: [] };

/** The first part of `remediation` the allowlist does not cover, or undefined. */
export function refusedRemediation(
  remediation: Pick<RemediationPolicy, "command" | "webhookUrl"> | undefined,
  allow: RemediationAllowlist,
): RemediationRefusal | undefined {
  const program = remediation?.command?.[0];
  if (program !== undefined && !allow.commands.includes(program)) {
    return {
      path: "remediation.command.0",
      message: `${program} is not in the control plane's remediationCommands (CLAWGATE_REMEDIATION_COMMANDS), which lists the absolute paths remediation may run${allow.commands.length === 0 ? "; it is empty, so every command is refused" : ""}`,
    };
  }
  const url = remediation?.webhookUrl;
  if (url !== undefined) {
    const origin = originOf(url);
    const allowed = allow.webhookOrigins.map(originOf);
    if (origin === undefined || !allowed.includes(origin)) {
      return {
        path: "remediation.webhookUrl",
        message: `the webhook's origin ${origin ?? "(unreadable)"} is not in the control plane's remediationWebhookOrigins (CLAWGATE_REMEDIATION_WEBHOOK_ORIGINS)${allow.webhookOrigins.length === 0 ? "; it is empty, so every webhook is refused" : ""}`,
      };
    }
  }
  return undefined;
}

/** scheme://host[:port], default ports dropped, as URL.origin spells it. */
function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}
