import type { LeaseBook } from "./lease-book.js";

/**
 * Reports consumed lease units every `intervalMs` (default 250 ms), so the control plane's
 * count of a tenant's budget trails the fleet by at most that: asks for more shares go out on
 * their own, this only keeps token debits and spent leases current between asks. The timer is
 * unref'd: it never keeps the process alive. Returns a function that stops it.
 */
export function startQuotaFlush(book: Pick<LeaseBook, "flush">, intervalMs = 250): () => void {
  const timer = setInterval(() => book.flush(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}
