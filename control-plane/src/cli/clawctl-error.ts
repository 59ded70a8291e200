/** Exit status of clawctl: 1 when the API or the input refused the request, 2 for misuse. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** A failure clawctl reports as one message and an exit status, without a stack trace. */
export class ClawctlError extends Error {
  readonly exitCode: number;
  /** Extra lines printed under the message (the API's field problems). */
  readonly lines: readonly string[];

  constructor(message: string, exitCode: number = EXIT_FAILURE, lines: readonly string[] = []) {
    super(message);
    this.name = "ClawctlError";
    this.exitCode = exitCode;
    this.lines = lines;
  }
}

/**
 * Ends clawctl with a status but no message: `diff` exits 1 when it found differences, which
 * is its answer, not an error.
 */
export class ClawctlExit extends Error {
  readonly exitCode: number;

  constructor(exitCode: number) {
    super(`exit ${exitCode}`);
    this.name = "ClawctlExit";
    this.exitCode = exitCode;
  }
}
