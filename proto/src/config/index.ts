// The config model both planes share: schemas, defaults and validation with structured problems.
export * from "./breaker-schema.js";
export * from "./defaults.js";
export { lineText, ms, nodeAddress, requestPath, resourceName } from "./field-rules.js";
export * from "./node-address.js";
export * from "./normalize-path.js";
export * from "./origin-form.js";
export * from "./problems.js";
export * from "./references.js";
export * from "./resource-name.js";
export * from "./resource-schemas.js";
export * from "./route-rules.js";
export * from "./route-schema.js";
export * from "./tenant-schema.js";
export * from "./upstream-schema.js";
export * from "./upstream-tls.js";
export * from "./validate-config.js";
export * from "./validate-delta.js";
