/** Resource kinds by their plural name, as the API, the store and problems spell them. */
export type ResourceKind = "upstreams" | "routes" | "breakers" | "tenants";

/**
 * One thing wrong with the config, in a form callers branch on: which resource (kind and name;
 * name "" when the resource has none), which field (dotted path such as "nodes.0.address", ""
 * for the whole resource) and what is wrong with it. Never parse `message`.
 */
export interface ConfigProblem {
  /** "snapshot" for a problem of the snapshot as a whole (its version, say). */
  kind: ResourceKind | "snapshot";
  name: string;
  field: string;
  message: string;
}

interface IssueLike {
  path: PropertyKey[];
  message: string;
  code?: string;
  keys?: string[];
}

/**
 * Turns zod issues into dotted field paths and messages. A strict object reports unknown keys
 * once, at the object; they are split here so each misspelt field is named by its own path.
 */
export function issueFields(issues: readonly IssueLike[]): { field: string; message: string }[] {
  const fields: { field: string; message: string }[] = [];
  for (const issue of issues) {
    const base = issue.path.map(String);
    if (issue.code === "unrecognized_keys" && issue.keys !== undefined) {
      for (const key of issue.keys)
        fields.push({ field: [...base, key].join("."), message: "unknown field" });
      continue;
    }
    fields.push({ field: base.join("."), message: issue.message });
  }
  return fields;
}

/** Zod issues as problems of one resource. */
export function problemsFromIssues(
  kind: ResourceKind,
  name: string,
  issues: readonly IssueLike[],
): ConfigProblem[] {
  return issueFields(issues).map(({ field, message }) => ({ kind, name, field, message }));
}

/** `route "api": match.pathPrefix must start with "/"`: one line, for logs and NACKs. */
export function formatProblem(problem: ConfigProblem): string {
  const who =
    problem.name === "" || problem.kind === "snapshot"
      ? problem.kind
      : `${problem.kind.slice(0, -1)} ${JSON.stringify(problem.name)}`;
  return problem.field === ""
    ? `${who}: ${problem.message}`
    : `${who}: ${problem.field} ${problem.message}`;
}

/** All problems on one line, separated by "; ". */
export function formatProblems(problems: readonly ConfigProblem[]): string {
  return problems.map(formatProblem).join("; ");
}
