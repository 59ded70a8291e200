/**
 * One `committed` callback (AlsoWrites) that calls each given: journals merged into one write
 * (the audit event and the history entry) each learn that the commit happened.
 */
export function allCommitted(...callbacks: (((revision: number) => void) | undefined)[]): {
  committed?: (revision: number) => void;
} {
  const present = callbacks.filter((callback) => callback !== undefined);
  if (present.length === 0) return {};
  return {
    committed: (revision) => {
      for (const callback of present) callback(revision);
    },
  };
}
