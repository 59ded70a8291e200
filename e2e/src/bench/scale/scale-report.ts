export interface ScaleRow {
  figure: string;
  value: string;
  /** The target for this figure, or "" when it has none. */
  target: string;
}

/** One plain-text table of every figure bench:scale measured, with its target beside it. */
export function formatScaleReport(rows: readonly ScaleRow[]): string {
  const header = { figure: "figure", value: "measured", target: "target" };
  const all = [header, ...rows];
  const width = (key: keyof ScaleRow) => Math.max(...all.map((row) => row[key].length));
  const widths = { figure: width("figure"), value: width("value"), target: width("target") };
  const line = (row: ScaleRow) =>
    `${row.figure.padEnd(widths.figure)}  ${row.value.padEnd(widths.value)}  ${row.target}`.trimEnd();
  const rule = `${"-".repeat(widths.figure)}  ${"-".repeat(widths.value)}  ${"-".repeat(widths.target)}`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}
