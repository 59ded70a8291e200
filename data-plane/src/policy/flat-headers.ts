/** Edits of the flat [name, value, ...] header list the proxy sends upstream (lower-case names). */

/** Removes every value of the headers `drop` says yes to. */
export function removeHeaders(headers: string[], drop: (name: string) => boolean): void {
  let to = 0;
  for (let from = 0; from < headers.length; from += 2) {
    const name = headers[from]!;
    if (drop(name)) continue;
    headers[to] = name;
    headers[to + 1] = headers[from + 1]!;
    to += 2;
  }
  headers.length = to;
}

/** Replaces every value of `name` with `value`. */
export function setHeader(headers: string[], name: string, value: string): void {
  removeHeaders(headers, (other) => other === name);
  headers.push(name, value);
}
