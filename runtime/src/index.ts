// What both binaries need to run under a supervisor: sd_notify, watchdog, drain, backoff.
export * from "./process/index.js";
export {
  ConfigError,
  type ConfigProblem,
  INVALID_CONFIG,
  isConfigError,
} from "./settings/config-error.js";
export { helpOrVersion, type ProgramInfo, renderHelp } from "./settings/help-text.js";
export {
  formatHostPort,
  type HostPort,
  type HostPortResult,
  hostPortSetting,
  isLoopback,
  parseHostPort,
} from "./settings/host-port.js";
export { type LoadSettingsOptions, loadSettings } from "./settings/load-settings.js";
export { packageVersion } from "./settings/package-version.js";
export {
  declareSettings,
  type SettingDeclaration,
  type SettingDeclarations,
  type SettingsOf,
} from "./settings/setting-declaration.js";
export {
  keepOrigins,
  settingError,
  settingOrigin,
} from "./settings/setting-origins.js";
