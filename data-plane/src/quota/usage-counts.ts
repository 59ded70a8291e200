/** Token counts read from one response's usage objects, of either provider style. */
export interface UsageCounts {
  input: number;
  output: number;
  /** A total the provider stated; wins over input + output. */
  total: number | undefined;
  /**
   * A usage figure that is the response's last word was read (a JSON body's, OpenAI's last
   * chunk, response.completed, Anthropic's message_delta); not Anthropic's message_start, whose
   * output is only a first count. Without it a stream is charged an estimate
   * (stream-usage-estimate.ts).
   */
  final: boolean;
}

export function emptyCounts(): UsageCounts {
  return { input: 0, output: 0, total: undefined, final: false };
}

/**
 * Reads one usage object of either style into `into`; Anthropic's output is a running total.
 * `final`: the object is the response's closing figure, not a first count a later event completes.
 */
export function readUsage(usage: unknown, into: UsageCounts, final = true): void {
  if (typeof usage !== "object" || usage === null) return;
  if (final) into.final = true;
  const u = usage as Record<string, unknown>;
  const n = (key: string) => (typeof u[key] === "number" && u[key] >= 0 ? (u[key] as number) : 0);
  if (typeof u.total_tokens === "number") {
    into.total = n("total_tokens");
    return;
  }
  const input =
    n("prompt_tokens") +
    n("input_tokens") +
    n("cache_creation_input_tokens") +
    n("cache_read_input_tokens");
  if (input > 0) into.input = input;
  const output = n("completion_tokens") + n("output_tokens");
  if (output > 0) into.output = output;
}

export function totalOf(counts: UsageCounts): number {
  return counts.total ?? counts.input + counts.output;
}
