import { ApiError, openStream } from "./api.js";

/**
 * Follows GET /v1/live: calls onEvent(type, data) for each server-sent event and
 * onState("live" | "reconnecting" | "refused", detail). fetch and a stream reader rather than
 * EventSource, which cannot send an Authorization header. Reconnects after a drop, waiting
 * longer each time (up to 10 s); the caller reloads its data on each "live", since events sent
 * while it was away are lost. Returns the function that stops it.
 */
export function followLive(token, onEvent, onState) {
  const abort = new AbortController();
  let delayMs = 500;

  async function once() {
    const body = await openStream(token, "/v1/live", abort.signal);
    onState("live");
    delayMs = 500;
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += value;
      let end = buffered.indexOf("\n\n");
      while (end !== -1) {
        dispatch(buffered.slice(0, end));
        buffered = buffered.slice(end + 2);
        end = buffered.indexOf("\n\n");
      }
    }
  }

  function dispatch(frame) {
    let type = "message";
    let data = "";
    for (const line of frame.split("\n")) {
      if (line.startsWith("event: ")) type = line.slice(7);
      else if (line.startsWith("data: ")) data += line.slice(6);
    }
    if (data === "") return; // a heartbeat or the opening comment
    try {
      onEvent(type, JSON.parse(data));
    } catch (error) {
      console.error("console: bad live event", type, error);
    }
  }

  (async () => {
    while (!abort.signal.aborted) {
      try {
        await once();
      } catch (error) {
        if (abort.signal.aborted) return;
        if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
          onState("refused", error);
          return;
        }
      }
      if (abort.signal.aborted) return;
      onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      delayMs = Math.min(delayMs * 2, 10_000);
    }
  })();
  return () => abort.abort();
}
