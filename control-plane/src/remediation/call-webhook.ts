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
  /** Aborting cancels the call like a timeout does (leadership lost, stopping). */
  signal?: AbortSignal;
}

const BODY_TAIL_CHARS = 200;
/**
 * How much of the answer is read: the journal keeps only its tail, and a webhook that streams
 * without end must neither fill the control plane's memory nor hold the attempt open.
 */
export const WEBHOOK_BODY_MAX_BYTES = 16_384;

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
  const timeout = AbortSignal.timeout(options.timeoutMs);
  const signal =
    options.signal === undefined ? timeout : AbortSignal.any([timeout, options.signal]);
  try {
    const response = await doFetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(payload),
      signal,
      redirect: "error",
    });
    const body = tail(await readBounded(response, WEBHOOK_BODY_MAX_BYTES), BODY_TAIL_CHARS);
    const suffix = body === "" ? "" : `: ${body}`;
    return response.ok
      ? { outcome: "ok", evidence: `webhook answered HTTP ${response.status}${suffix}` }
      : { outcome: "failed", evidence: `webhook answered HTTP ${response.status}${suffix}` };
  } catch (error) {
    if (options.signal?.aborted) {
      return { outcome: "failed", evidence: "webhook call aborted (leadership lost or stopping)" };
    }
    if (timeout.aborted) {
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

/** The first `maxBytes` of the body as text; the rest is not read, the stream is cancelled. */
async function readBounded(response: Response, maxBytes: number): Promise<string> {
  const reader = response.body?.getReader();
  if (reader === undefined) return "";
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    while (size < maxBytes) {
      const { done, value } = await reader.read();
      if (done) break;
      const room = maxBytes - size;
      chunks.push(value.byteLength > room ? value.subarray(0, room) : value);
      size += Math.min(value.byteLength, room);
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
  return new TextDecoder().decode(Buffer.concat(chunks));
}
