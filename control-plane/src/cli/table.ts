/** Renders rows under upper-case headers, columns padded to their widest cell, as kubectl does. */
export function renderTable(
  headers: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const line = (cells: readonly string[]) =>
    cells
      .map((cell, column) =>
        column === cells.length - 1 ? cell : cell.padEnd(widths[column] ?? 0),
      )
      .join("   ")
      .trimEnd();
  return `${[line(headers), ...rows.map(line)].join("\n")}\n`;
}

/** "42s ago", "7m ago", "3h ago", "2d ago": how long ago `iso` was; "-" when it is not a time. */
export function formatAge(iso: string | undefined, now: number): string {
  const then = iso === undefined ? Number.NaN : Date.parse(iso);
  if (Number.isNaN(then)) return "-";
  const seconds = Math.max(0, Math.floor((now - then) / 1000));
  if (seconds < 120) return `${seconds}s ago`;
  if (seconds < 7_200) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 172_800) return `${Math.floor(seconds / 3_600)}h ago`;
  return `${Math.floor(seconds / 86_400)}d ago`;
}
