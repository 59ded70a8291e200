/** One response as a sequential client saw it. */
export interface ServedBy {
  /** The node that answered. */
  node: string;
  /** How many config writes had started when the response was complete: the newest state it can come from. */
  newestState: number;
}

/**
 * Checks a sequential client's responses against the write history. `reach[k]` is the set of
 * nodes the route could reach in the config after k writes. A data plane swaps whole snapshots
 * and only moves forward, so each response must come from a state no older than the one before
 * it and no newer than `newestState`. The earliest fitting state is chosen each time, which is
 * the most lenient assignment possible: a response that fits none came from a node list no
 * single snapshot paired with the route at that point. Returns one line per such response.
 */
export function mixedSnapshotResponses(
  reach: ReadonlySet<string>[],
  seen: ServedBy[],
  /** How to name state k in messages (e.g. its snapshot version); default k. */
  stateName: (k: number) => string = String,
): string[] {
  const problems: string[] = [];
  let earliest = 0;
  seen.forEach((response, index) => {
    const newest = Math.min(response.newestState, reach.length - 1);
    let k = earliest;
    while (k <= newest && !reach[k]!.has(response.node)) k++;
    if (k <= newest) {
      earliest = k;
      return;
    }
    const states: string[] = [];
    for (let s = earliest; s <= newest; s++)
      states.push(`${stateName(s)}:{${[...reach[s]!].join(",")}}`);
    problems.push(
      `response ${index} came from ${response.node}, but the route could only reach ${states.join(" ")}`,
    );
  });
  return problems;
}
