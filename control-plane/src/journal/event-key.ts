/**
 * Journal keys: `{prefix}events/{epoch ms, 15 digits}-{sequence, 6 digits}`. Zero padding makes
 * key order time order, so a prefix range read returns the journal oldest first.
 */
const TIME_DIGITS = 15;
const SEQ_DIGITS = 6;
export const SEQ_MODULUS = 10 ** SEQ_DIGITS;

export function eventsPrefix(prefix: string): string {
  return `${prefix}events/`;
}

export function eventId(timeMs: number, seq: number): string {
  const time = String(Math.max(0, Math.trunc(timeMs))).padStart(TIME_DIGITS, "0");
  return `${time}-${String(seq % SEQ_MODULUS).padStart(SEQ_DIGITS, "0")}`;
}

/** The epoch milliseconds an event id starts with; NaN when the id is not one of ours. */
export function eventIdTime(id: string): number {
  const match = /^(\d+)-\d+$/.exec(id);
  return match?.[1] === undefined ? Number.NaN : Number(match[1]);
}
