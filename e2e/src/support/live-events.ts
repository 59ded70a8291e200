import { waitFor } from "./wait-for.js";

/** One server-sent event of GET /v1/live: its name and its JSON data. */
export interface LiveEvent {
  type: string;
  data: unknown;
}

export interface LiveEvents {
  /** Every event received so far, in order. */
  readonly events: LiveEvent[];
  /** Resolves with the first event (received before or after) that `match` accepts. */
  next(what: string, match: (event: LiveEvent) => boolean, timeoutMs?: number): Promise<LiveEvent>;
  close(): void;
}

/**
 * Follows a control plane's GET /v1/live as the console does (fetch with the token in the
 * Authorization header), collecting its events. Resolves once the stream is open.
 */
export async function openLiveEvents(adminUrl: string, token: string): Promise<LiveEvents> {
  const abort = new AbortController();
  const response = await fetch(`${adminUrl}/v1/live`, {
    headers: { authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  if (response.status !== 200 || response.body === null) {
    abort.abort();
    throw new Error(`GET /v1/live answered ${response.status}: ${await response.text()}`);
  }
  const events: LiveEvent[] = [];
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  void (async () => {
    let buffered = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buffered += value;
        for (let end = buffered.indexOf("\n\n"); end !== -1; end = buffered.indexOf("\n\n")) {
          const frame = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          let type = "message";
          let data = "";
          for (const line of frame.split("\n")) {
            if (line.startsWith("event: ")) type = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          // Heartbeats and the opening comment carry no data.
          if (data !== "") events.push({ type, data: JSON.parse(data) });
        }
      }
    } catch {
      // Aborted by close(), or the control plane went away: the events so far stay.
    }
  })();
  return {
    events,
    next: (what, match, timeoutMs = 20_000) =>
      waitFor(() => events.find(match), { what, timeoutMs }),
    close: () => abort.abort(),
  };
}
