/**
 * The targets in the order of `round` (1-based): the first round as listed, each next one
 * starting one target later. In a fixed order each target always ran right after the same
 * one, in the same part of the round, and the log-off twin after the logged data plane: the
 * slot moved CPU per request by as much as the build did.
 */
export function inTurn<T>(targets: readonly T[], round: number): T[] {
  const shift = (round - 1) % Math.max(1, targets.length);
  return [...targets.slice(shift), ...targets.slice(0, shift)];
}
