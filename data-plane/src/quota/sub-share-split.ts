/**
 * How much of what a data plane's primary holds for a tenant it lends a proxy worker that
 * asks: an even part for each worker (at least 1 unit), so one busy worker cannot take what
 * another needs, while a worker alone with the traffic still gets half of it from two workers
 * and asks again (at half of that) long before it runs out. The control plane's ledger splits
 * the fleet's budget the same way one level up (remaining / (2 x data planes)), so shares
 * shrink as the window fills, down to 1 unit at a time near the limit.
 */
export function subShare(available: number, workers: number): number {
  if (!(available > 0)) return 0;
  return Math.min(available, Math.max(1, Math.ceil(available / Math.max(1, workers))));
}
