import type { ErrorCode } from "./error-catalog.js";

/**
 * The error a request body stream fails with when the client's body itself is refused as it
 * streams (past maxBodyBytes, a UTF-16/32 JSON object on a usage route): `code` names the
 * cause, `refusal` the catalog error the proxy answers with, as the client's fault rather than
 * the upstream's. One mechanism for every such cut, so the proxy maps them in one place.
 */
export interface BodyRefusal extends Error {
  readonly code: string;
  readonly refusal: ErrorCode;
}

export function bodyRefusal(code: string, refusal: ErrorCode, message: string): BodyRefusal {
  return Object.assign(new Error(message), { code, refusal });
}

/** The catalog error a failed body stream asks to be answered with, if it was a refusal. */
export function refusalOf(error: unknown): ErrorCode | undefined {
  return (error as Partial<BodyRefusal> | undefined)?.refusal;
}
