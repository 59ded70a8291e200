// The compiler alone: the wire snapshot, checked with the shared validation, made immutable.
export { compileSnapshot } from "./compile-snapshot.js";
export type { CompiledSnapshot, CompileResult } from "./compiled-types.js";
