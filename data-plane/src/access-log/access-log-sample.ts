/**
 * Which requests get an access-log line under `accessLogSample`: every error (a status of 500
 * or more, or a failure kind) always, since those are the lines someone will look for, and a
 * success with probability `rate`, so a busy proxy can keep its log small. `random` is
 * injectable so tests can pin the draw.
 */
export function accessLogSampler(
  rate: number,
  random: () => number = Math.random,
): (status: number, failed: boolean) => boolean {
  if (!(rate >= 0 && rate <= 1)) throw new RangeError(`accessLogSample must be 0..1, got ${rate}`);
  // The default keeps every line without drawing a number per request.
  if (rate === 1) return () => true;
  return (status, failed) => failed || status >= 500 || random() < rate;
}
