/** A systemd unit file as section -> key -> values (a key may repeat, e.g. Environment=). */
export type UnitFile = ReadonlyMap<string, ReadonlyMap<string, readonly string[]>>;

/**
 * Parses the subset of systemd's unit syntax the shipped units use: [Section] headers, Key=Value
 * lines, and "#" or ";" comment lines. Continuation lines ("\" at the end) are rejected rather
 * than misread, so a unit that starts using them makes its test fail loudly.
 */
export function parseUnitFile(text: string): UnitFile {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const [index, raw] of text.split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    if (line.endsWith("\\")) throw new Error(`line ${index + 1}: continuation lines unsupported`);
    const header = /^\[([A-Za-z]+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const eq = line.indexOf("=");
    if (current === undefined || eq < 1) throw new Error(`line ${index + 1}: not Key=Value`);
    const key = line.slice(0, eq).trim();
    const values = current.get(key) ?? [];
    values.push(line.slice(eq + 1).trim());
    current.set(key, values);
  }
  return sections;
}

/** The last value of a key (systemd's "last one wins" for single-valued keys). */
export function unitValue(unit: UnitFile, section: string, key: string): string | undefined {
  return unit.get(section)?.get(key)?.at(-1);
}
