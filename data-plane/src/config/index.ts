export { ConfigError, type ConfigProblem, isConfigError } from "./config-error.js";
export { configSchema, type DataPlaneConfig, LOG_LEVELS } from "./config-schema.js";
export { FIELD_SOURCES } from "./config-sources.js";
export { cpTlsPairingProblems, readCpTls } from "./cp-tls.js";
export { formatHostPort, type HostPort, parseHostPort } from "./host-port.js";
export { type LoadConfigOptions, loadConfig } from "./load-config.js";
