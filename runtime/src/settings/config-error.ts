/** The one code both binaries use for a bad setting; callers check it, not `instanceof`. */
export const INVALID_CONFIG = "CLAWGATE_INVALID_CONFIG";

/** One bad setting: which field, what it got, and which layer it came from. */
export interface ConfigProblem {
  /** Field path, e.g. `cpAddresses[1]`, or the flag for a command-line problem. */
  field: string;
  /** The value given; left out of messages for secret settings. */
  value: unknown;
  /**
   * `default`, `file <path>`, `env <NAME>` or `flag --<name>`; `settings` only for a later check
   * on settings the loader did not make (see settingOrigin).
   */
  layer: string;
  reason: string;
}

/**
 * Thrown at boot when the settings are invalid; the binary prints it and exits with status 2.
 * Every problem found is reported at once, so a user fixes them in one pass.
 */
export class ConfigError extends Error {
  readonly code = INVALID_CONFIG;
  readonly problems: readonly ConfigProblem[];

  constructor(problems: ConfigProblem[]) {
    super(`${INVALID_CONFIG}: ${problems.map(describeProblem).join("; ")}`);
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

/** True for a ConfigError from any copy of this package (code, not class identity). */
export function isConfigError(err: unknown): err is ConfigError {
  return (
    typeof err === "object" && err !== null && (err as { code?: unknown }).code === INVALID_CONFIG
  );
}
