import type { HealEventInput } from "../journal/heal-event.js";

/**
 * A heal journal for tests: keeps every event recorded, in order, in `recorded`, and answers
 * each record as the real journal would have stored it.
 */
export function recordingJournal(recorded: HealEventInput[] = []) {
  const journal = {
    record: async (event: HealEventInput) => {
      recorded.push(event);
      return { id: "x", time: "t", ...event } as never;
    },
  };
  return { journal, recorded };
}
