/**
 * A hook's stderr goes into the heal journal, which any viewer token reads. Hooks run without
 * CLAWGATE_* variables, but one could still print such a value it found (in a unit file, in
 * /proc): anything shaped like `CLAWGATE_NAME=value` or `CLAWGATE_NAME: value` keeps its name
 * and loses its value.
 */
export function redactClawgateValues(text: string): string {
  return text.replace(/(CLAWGATE_[A-Z0-9_]*)(\s*[=:]\s*)("[^"]*"|'[^']*'|\S+)/g, "$1$2[redacted]");
}
