import type { EndedKind } from "../../errors/failure-kind.js";

/**
 * Why the proxy itself ended an attempt; never shown to clients. The node's pool reports it
 * back as a failure of this kind, which every stage above knows to learn nothing from.
 */
export class ExchangeAbort extends Error {
  constructor(
    readonly kind: EndedKind,
    message: string,
  ) {
    super(message);
  }
}

/** The client closed its connection: the attempt is aborted so its connection is released. */
export function clientGone(): ExchangeAbort {
  return new ExchangeAbort("client_gone", "client closed the connection");
}

/** The client already has its answer (total timeout, stale copy, internal error). */
export function answered(why: string): ExchangeAbort {
  return new ExchangeAbort("aborted", why);
}
