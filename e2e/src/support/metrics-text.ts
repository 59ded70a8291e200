/** One sample line of the Prometheus text format. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses the Prometheus text exposition format; comments and blank lines are skipped. */
export function parseMetrics(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    const match = SAMPLE.exec(line);
    if (match === null) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? "").matchAll(LABEL)) {
      labels[label[1]!] = label[2]!.replace(/\\n/g, "\n").replace(/\\(.)/g, "$1");
    }
    samples.push({ name: match[1]!, labels, value: parseValue(match[3]!) });
  }
  return samples;
}

/** Samples of `name` whose labels include every label in `labels`. */
export function findSamples(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): MetricSample[] {
  return parseMetrics(text).filter(
    (sample) =>
      sample.name === name &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
}

/** Value of the first matching sample, or undefined when there is none. */
export function metricValue(
  text: string,
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  return findSamples(text, name, labels)[0]?.value;
}

/** Sum over every matching sample (0 when there is none), e.g. a counter across codes. */
export function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  return findSamples(text, name, labels).reduce((sum, sample) => sum + sample.value, 0);
}

function parseValue(text: string): number {
  if (text === "+Inf") return Number.POSITIVE_INFINITY;
  if (text === "-Inf") return Number.NEGATIVE_INFINITY;
  return Number(text);
}
