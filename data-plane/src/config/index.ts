export { DATA_PLANE_SETTINGS, type DataPlaneConfig, LOG_LEVELS } from "./config-schema.js";
export { cpTlsPairingProblems, readCpTls } from "./cp-tls.js";
export { type LoadConfigOptions, loadConfig } from "./load-config.js";
