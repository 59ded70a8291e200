import { useEffect, useState } from "preact/hooks";
import { explain } from "../api.js";

/**
 * Runs `load(signal)` whenever `deps` change and keeps its result, or the message of its
 * failure; a newer load cancels an older one still running.
 */
export function useLoad(load, deps) {
  const [state, setState] = useState({ value: undefined, error: "" });
  useEffect(() => {
    const abort = new AbortController();
    load(abort.signal)
      .then((value) => {
        if (!abort.signal.aborted) setState({ value, error: "" });
      })
      .catch((failure) => {
        if (!abort.signal.aborted) setState((old) => ({ ...old, error: explain(failure) }));
      });
    return () => abort.abort();
  }, deps);
  return [state, setState];
}
