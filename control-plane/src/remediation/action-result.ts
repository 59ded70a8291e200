import type { HealOutcome } from "../journal/heal-event.js";

/** How one remediation action ended, as the journal records it. */
export interface ActionResult {
  outcome: Extract<HealOutcome, "ok" | "failed" | "timeout">;
  /** Exit code or HTTP status and a short tail of what the action said; never its inputs. */
  evidence: string;
}

/** Keeps the end of `text`, where a failing command says why. */
export function tail(text: string, chars: number): string {
  const trimmed = text.trim();
  return trimmed.length > chars ? `…${trimmed.slice(-(chars - 1))}` : trimmed;
}
