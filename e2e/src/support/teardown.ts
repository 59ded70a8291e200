/**
 * Things to undo, run last-in first-out. Every step runs even when an earlier one fails, so
 * one stuck process does not leave the rest running; the first error is rethrown at the end.
 */
export class Teardown {
  private readonly steps: { what: string; run: () => unknown }[] = [];

  add(what: string, run: () => unknown): void {
    this.steps.push({ what, run });
  }

  async run(): Promise<void> {
    let first: unknown;
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.run();
      } catch (error) {
        first ??= new Error(`teardown of ${step.what} failed`, { cause: error });
      }
    }
    if (first !== undefined) throw first;
  }
}
