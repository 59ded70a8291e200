export * from "./resources/config-state.js";
export * from "./resources/consistency.js";
export * from "./resources/schemas.js";
export type * from "./store/store.js";
