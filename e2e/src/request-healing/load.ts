export interface Outcome {
  /** Which request of the run, 0-based. */
  index: number;
  startedAt: number;
  endedAt: number;
  /** HTTP status, or 0 when the request failed at the transport. */
  status: number;
  detail?: string;
}

export interface LoadOptions {
  /** Requests in flight at once. */
  workers: number;
  /** Stop starting requests after this long: a guard, so a story that never ends still does. */
  durationMs: number;
  /**
   * Stop starting requests once this returns true: the event a story waits for (say, enough
   * requests after a kill), so the amount of load does not depend on how fast the machine is.
   */
  until?: () => boolean;
  /** Stop starting requests after this many. */
  maxRequests: number;
  /** Sends request `index` and resolves with its status (0 on a transport failure). */
  send: (index: number) => Promise<{ status: number; detail?: string }>;
}

/** Closed-loop load bounded by an event, time and count; resolves with every request's outcome. */
export async function runLoad(options: LoadOptions): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const deadline = Date.now() + options.durationMs;
  let next = 0;
  const worker = async () => {
    while (Date.now() < deadline && next < options.maxRequests && options.until?.() !== true) {
      const index = next++;
      const startedAt = Date.now();
      let result: { status: number; detail?: string };
      try {
        result = await options.send(index);
      } catch (error) {
        result = { status: 0, detail: error instanceof Error ? error.message : String(error) };
      }
      outcomes.push({ index, startedAt, endedAt: Date.now(), ...result });
    }
  };
  await Promise.all(Array.from({ length: options.workers }, worker));
  return outcomes;
}

/** A request through the proxy that reports its status and, for errors, the body. */
export async function statusOf(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; detail?: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000), ...init });
  const text = await response.text();
  return response.status === 200 ? { status: 200 } : { status: response.status, detail: text };
}
