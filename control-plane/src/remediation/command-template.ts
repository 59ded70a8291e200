/** Values a remediation template may name. */
export interface TemplateValues {
  /** The node's host, without IPv6 brackets. */
  host: string;
  /** The node's port, as text. */
  port: string;
  /** The node's address as the config spells it (host:port). */
  node: string;
}

const PLACEHOLDER = /\{(host|port|node)\}/g;

/**
 * Fills `{host}`, `{port}` and `{node}` inside each argument. One pass with a replacer
 * function, so a value is inserted literally: it is never re-scanned for placeholders and `$`
 * patterns in it mean nothing. The result goes to execve as it is, one argument per element,
 * never through a shell, so `; rm -rf /` in a value stays text.
 */
export function expandCommand(template: readonly string[], values: TemplateValues): string[] {
  return template.map((argument) =>
    argument.replace(PLACEHOLDER, (_match, name: keyof TemplateValues) => values[name]),
  );
}

/** Splits "host:port" or "[v6]:port" into template values. */
export function templateValues(address: string): TemplateValues {
  const colon = address.lastIndexOf(":");
  const rawHost = colon < 0 ? address : address.slice(0, colon);
  const port = colon < 0 ? "" : address.slice(colon + 1);
  const host = rawHost.startsWith("[") && rawHost.endsWith("]") ? rawHost.slice(1, -1) : rawHost;
  return { host, port, node: address };
}
