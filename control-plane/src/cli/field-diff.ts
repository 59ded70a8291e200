/** One field that differs: its dotted path ("match.pathPrefix", "nodes.0.weight"). */
export type FieldChange =
  | { op: "added"; path: string; after: unknown }
  | { op: "removed"; path: string; before: unknown }
  | { op: "changed"; path: string; before: unknown; after: unknown };

/** How one resource differs: created or deleted as a whole, or changed field by field. */
export interface ResourceDiff {
  kind: string;
  name: string;
  action: "create" | "delete" | "change";
  fields: FieldChange[];
}

/**
 * The fields that differ between two JSON documents, in path order. Objects are compared key
 * by key and arrays index by index, down to leaves (strings, numbers, booleans, null, and
 * empty objects or arrays, which are leaves so that `{}` -> `{ a: 1 }` reads as one addition).
 */
export function diffFields(before: unknown, after: unknown): FieldChange[] {
  const left = flatten(before);
  const right = flatten(after);
  const paths = [...new Set([...left.keys(), ...right.keys()])].sort(comparePaths);
  const changes: FieldChange[] = [];
  for (const path of paths) {
    const had = left.has(path);
    const has = right.has(path);
    if (had && !has) changes.push({ op: "removed", path, before: left.get(path) });
    else if (!had && has) changes.push({ op: "added", path, after: right.get(path) });
    else if (!sameLeaf(left.get(path), right.get(path))) {
      changes.push({ op: "changed", path, before: left.get(path), after: right.get(path) });
    }
  }
  return changes;
}

/** Leaves of a JSON value by dotted path; the whole value under "" when it is a leaf. */
export function flatten(value: unknown, path = "", into = new Map<string, unknown>()) {
  if (isContainer(value) && Object.keys(value).length > 0) {
    for (const [key, child] of Object.entries(value)) {
      // A field that is absent and one that is undefined are the same to JSON.
      if (child === undefined) continue;
      flatten(child, path === "" ? key : `${path}.${key}`, into);
    }
  } else if (value !== undefined) {
    into.set(path, value);
  }
  return into;
}

function isContainer(value: unknown): value is Record<string, unknown> | unknown[] {
  return typeof value === "object" && value !== null;
}

function sameLeaf(a: unknown, b: unknown): boolean {
  // Leaves are scalars or empty containers; an empty array and an empty object still differ.
  if (isContainer(a) || isContainer(b)) return JSON.stringify(a) === JSON.stringify(b);
  return Object.is(a, b);
}

/** Path order that sorts array indices numerically: nodes.2 before nodes.10. */
function comparePaths(a: string, b: string): number {
  const left = a.split(".");
  const right = b.split(".");
  for (let i = 0; i < Math.min(left.length, right.length); i++) {
    const x = left[i] as string;
    const y = right[i] as string;
    if (x === y) continue;
    const nx = /^\d+$/.test(x) ? Number(x) : Number.NaN;
    const ny = /^\d+$/.test(y) ? Number(y) : Number.NaN;
    if (!Number.isNaN(nx) && !Number.isNaN(ny)) return nx - ny;
    return x < y ? -1 : 1;
  }
  return left.length - right.length;
}

/** Text of a field diff, `+ path: value` and so on, coloured when `colour` (a terminal). */
export function renderDiff(diffs: readonly ResourceDiff[], colour: boolean): string {
  const paint = (code: string, text: string) => (colour ? `\u001b[${code}m${text}\u001b[0m` : text);
  const green = (text: string) => paint("32", text);
  const red = (text: string) => paint("31", text);
  const yellow = (text: string) => paint("33", text);
  const lines: string[] = [];
  for (const diff of diffs) {
    const id = `${diff.kind}/${diff.name}`;
    if (diff.action === "create") lines.push(green(`+ ${id} (created)`));
    else if (diff.action === "delete") lines.push(red(`- ${id} (deleted)`));
    else lines.push(yellow(`~ ${id}`));
    for (const field of diff.fields) {
      const path = field.path === "" ? "(whole document)" : field.path;
      if (field.op === "added") lines.push(green(`    + ${path}: ${show(field.after)}`));
      else if (field.op === "removed") lines.push(red(`    - ${path}: ${show(field.before)}`));
      else lines.push(yellow(`    ~ ${path}: ${show(field.before)} -> ${show(field.after)}`));
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`;
}

function show(value: unknown): string {
  return JSON.stringify(value);
}
