export * from "./resources/config-state.js";
export * from "./resources/consistency.js";
export type * from "./store/store.js";
