/**
 * Hands the live events to whichever views are open: each view subscribes to the event types
 * it shows and patches its own state, so one stream serves every view.
 */
export function createBus() {
  const listeners = new Map();
  return {
    on(type, listener) {
      let set = listeners.get(type);
      if (set === undefined) {
        set = new Set();
        listeners.set(type, set);
      }
      set.add(listener);
      return () => set.delete(listener);
    },
    emit(type, data) {
      for (const listener of listeners.get(type) ?? []) listener(data);
    },
  };
}
