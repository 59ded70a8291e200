import { setImmediate as nextTurn } from "node:timers/promises";

/**
 * `items` in order, each after the next event-loop turn but the first: a render of metric
 * families one at a time, so 10,000 routes' histogram buckets do not hold requests, pings and
 * timers for the whole of it. The turn is taken when the next item is asked for.
 */
export async function* onePerTurn<T>(items: Iterable<T>): AsyncGenerator<T> {
  let first = true;
  for (const item of items) {
    if (!first) await nextTurn();
    first = false;
    yield item;
  }
}
