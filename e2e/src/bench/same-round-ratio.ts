/**
 * The ratio of a target's figure to a base target's, as the median over rounds of each round's
 * own ratio. Targets take turns within a round, so a burst of load from elsewhere on the machine
 * (or a GC pause landing in one run's last percentile) moves both sides of a same-round ratio
 * alike; a ratio of two medians, each picked from a different round, keeps that noise. bench:ab
 * reads its CPU ratio the same way.
 *
 * `own` and `base` hold one value per round, in round order; a round where either is missing or
 * the base is 0 is left out. Undefined when no round is left.
 */
export function sameRoundRatio(
  own: readonly (number | undefined)[],
  base: readonly (number | undefined)[],
): number | undefined {
  const ratios: number[] = [];
  for (let round = 0; round < Math.min(own.length, base.length); round++) {
    const value = own[round];
    const divisor = base[round];
    if (value === undefined || divisor === undefined || divisor === 0) continue;
    ratios.push(value / divisor);
  }
  if (ratios.length === 0) return undefined;
  ratios.sort((a, b) => a - b);
  const middle = Math.floor(ratios.length / 2);
  // An even count takes the mean of the two middle ratios, so two rounds do not favour either.
  return ratios.length % 2 === 1 ? ratios[middle]! : (ratios[middle - 1]! + ratios[middle]!) / 2;
}
