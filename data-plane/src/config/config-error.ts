/** One bad setting: which field, what it got, and which layer it came from. */
export interface ConfigProblem {
  /** Field path, e.g. `cpAddresses[1]`. */
  field: string;
  value: unknown;
  /** `default`, `file <path>`, `env <NAME>` or `flag --<name>`. */
  layer: string;
  reason: string;
}

/**
 * Thrown at boot when the settings are invalid; the bin prints it and exits with status 2.
 * Callers check `err.code`, not `instanceof`.
 */
export class ConfigError extends Error {
  readonly code = "CLAWGATE_CONFIG_INVALID";
  readonly problems: readonly ConfigProblem[];

  constructor(problems: ConfigProblem[]) {
    super(`CLAWGATE_CONFIG_INVALID: ${problems.map(describeProblem).join("; ")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }

  /** The first problem's field, for callers that report one. */
  get field(): string {
    return this.problems[0]?.field ?? "";
  }
}

function describeProblem(problem: ConfigProblem): string {
  const value = problem.value === undefined ? "" : ` = ${JSON.stringify(problem.value)}`;
  return `${problem.field}${value} (from ${problem.layer}): ${problem.reason}`;
}

export function isConfigError(err: unknown): err is ConfigError {
  return (
    typeof err === "object" &&
    err !== null &&
    (err as { code?: unknown }).code === "CLAWGATE_CONFIG_INVALID"
  );
}
