import { type ActionResult, tail } from "./action-result.js";

/** What a remediation webhook receives. */
export interface WebhookPayload {
  upstream: string;
  node: string;
  host: string;
  port: number;
  /** Why the node was evicted, as the data planes' probes saw it. */
  evidence: string;
}

export interface CallWebhookOptions {
  timeoutMs: number;
  /** Default the global fetch. */
  fetch?: typeof fetch;
}

const BODY_TAIL_CHARS = 200;

/**
 * POSTs `payload` as JSON; a 2xx answer is ok. The evidence names the status and a short tail
 * of the answer, never the URL, which may carry a token.
 */
export async function callWebhook(
  url: string,
  payload: WebhookPayload,
  options: CallWebhookOptions,
): Promise<ActionResult> {
  const doFetch = options.fetch ?? fetch;
  const signal = AbortSignal.timeout(options.timeoutMs);
  try {
    const response = await doFetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
      signal,
      redirect: "error",
    });
    const body = tail(await response.text(), BODY_TAIL_CHARS);
    const suffix = body === "" ? "" : `: ${body}`;
    return response.ok
      ? { outcome: "ok", evidence: `webhook answered HTTP ${response.status}${suffix}` }
      : { outcome: "failed", evidence: `webhook answered HTTP ${response.status}${suffix}` };
  } catch (error) {
    if (signal.aborted) {
      return {
        outcome: "timeout",
        evidence: `webhook did not answer within ${options.timeoutMs} ms`,
      };
    }
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    const reason =
      cause?.code ?? cause?.message ?? (error instanceof Error ? error.message : String(error));
    return { outcome: "failed", evidence: `webhook call failed: ${reason}` };
  }
}
