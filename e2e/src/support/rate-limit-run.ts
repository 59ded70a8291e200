import { expect } from "vitest";
import type { FreshAnswer } from "./fresh-connections.js";
import { errorCodeOf } from "./proxy-client.js";

/**
 * Sends `count` requests one after another (`send` gets each one's index, so a caller can
 * spread them over data planes) and counts how many were admitted (200) and refused. Every
 * refusal must be the rate limiter's: 429 CLAWGATE_RATE_LIMITED with a Retry-After of 1 s or more.
 */
export async function runAgainstRateLimit(
  count: number,
  send: (index: number) => Promise<FreshAnswer>,
): Promise<{ admitted: number; refused: number }> {
  let admitted = 0;
  let refused = 0;
  for (let i = 0; i < count; i++) {
    const response = await send(i);
    if (response.status === 200) {
      admitted++;
      continue;
    }
    expect(response.status).toBe(429);
    expect(errorCodeOf(response.text)).toBe("CLAWGATE_RATE_LIMITED");
    expect(Number(response.headers["retry-after"])).toBeGreaterThanOrEqual(1);
    refused++;
  }
  return { admitted, refused };
}
