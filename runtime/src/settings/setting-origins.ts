import { ConfigError } from "./config-error.js";

/**
 * Where each value of a loaded settings object came from (`env CLAWGATE_X`, `flag --x`,
 * `file <path>`, `default`), kept beside the object rather than in it: the settings stay the
 * plain frozen values callers and tests compare, and a check made after loading (a TLS file
 * that cannot be read, an access log that cannot be opened) names the layer to fix just as the
 * loader's own checks do.
 */
const ORIGINS = new WeakMap<object, Readonly<Record<string, string>>>();

/** Names the layers `settings` were read from (the loader calls it on what it returns). */
export function recordOrigins(settings: object, origins: Readonly<Record<string, string>>): void {
  // Null-prototype: a field named like an Object.prototype member is never found there.
  ORIGINS.set(settings, Object.freeze(Object.assign(Object.create(null), origins)));
}

/**
 * `derived`, a copy of loaded settings with fields worked out from them, answers where a value
 * came from as `loaded` does (a field it adds is `default`).
 */
export function keepOrigins<T extends object>(loaded: object, derived: T): T {
  const origins = ORIGINS.get(loaded);
  if (origins !== undefined) ORIGINS.set(derived, origins);
  return derived;
}

/**
 * The layer the value of `field` (or of the setting a path like `certs[1]` starts with) came
 * from; `settings` for an object the loader did not make, as tests build their own.
 */
export function settingOrigin(settings: object, field: string): string {
  const origins = ORIGINS.get(settings);
  if (origins === undefined) return "settings";
  return origins[field.split(/[.[]/)[0] ?? field] ?? "default";
}

/** A bad setting found after loading, named with its value and the layer it came from. */
export function settingError(
  settings: object,
  field: string,
  value: unknown,
  reason: string,
): ConfigError {
  return new ConfigError([{ field, value, layer: settingOrigin(settings, field), reason }]);
}
