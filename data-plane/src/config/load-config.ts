import { readFileSync } from "node:fs";
import { hostname as osHostname } from "node:os";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import { ConfigError, type ConfigProblem } from "./config-error.js";
import { type ConfigField, configSchema, type DataPlaneConfig } from "./config-schema.js";
import { FIELD_SOURCES, fromText } from "./config-sources.js";
import { cpTlsPairingProblems } from "./cp-tls.js";
import { parseHostPort } from "./host-port.js";

export interface LoadConfigOptions {
  /** Command-line arguments after the script; default process.argv.slice(2). */
  argv?: readonly string[];
  /** Environment to read CLAWGATE_* from; default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Used in the default node id; default os.hostname(). */
  hostname?: string;
  /** Reads the --config file; default fs.readFileSync as UTF-8. */
  readFile?: (path: string) => string;
}

const FIELDS = Object.keys(FIELD_SOURCES) as ConfigField[];
const FIELD_BY_FLAG = new Map(FIELDS.map((field) => [FIELD_SOURCES[field].flag, field]));
const KNOWN_FLAGS = ["--config", ...FIELDS.map((field) => `--${FIELD_SOURCES[field].flag}`)];

/** One layer's contribution: raw values and, per field, where each came from. */
interface Layered {
  values: Record<string, unknown>;
  origins: Record<string, string>;
}

/**
 * Null-prototype records: a YAML key "__proto__" copied into a plain object would replace its
 * prototype and smuggle settings past validation; here it stays a key, reported as unknown.
 */
function emptyLayer(): Layered {
  return { values: Object.create(null), origins: Object.create(null) };
}

/**
 * Loads the data plane's settings in layers, each overriding the one before: defaults, the
 * YAML file named by --config, CLAWGATE_* env vars, then flags. Validated once and frozen;
 * any bad value throws a ConfigError naming the field, the value and its layer.
 */
export function loadConfig(options: LoadConfigOptions = {}): DataPlaneConfig {
  const argv = options.argv ?? process.argv.slice(2);
  const env = options.env ?? process.env;
  const readFile = options.readFile ?? ((path: string) => readFileSync(path, "utf8"));

  const flags = readFlags(argv);
  const merged = emptyLayer();
  if (flags.configFile !== undefined) mergeInto(merged, readYamlLayer(flags.configFile, readFile));
  mergeInto(merged, readEnvLayer(env));
  mergeInto(merged, flags.layer);

  const parsed = configSchema.safeParse(merged.values);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.flatMap((issue) => toProblems(issue, merged)));
  }
  const settings = parsed.data;
  const pairing = cpTlsPairingProblems(settings, (field) => merged.origins[field] ?? "default");
  if (pairing.length > 0) throw new ConfigError(pairing);
  const proxy = parseHostPort(settings.proxyListen, { allowPortZero: true });
  const proxyPort = proxy.ok ? proxy.value.port : 0;
  const nodeId = settings.nodeId ?? `${options.hostname ?? osHostname()}-${proxyPort}`;
  return Object.freeze({
    ...settings,
    nodeId,
    cpAddresses: Object.freeze([...settings.cpAddresses]),
  });
}

function mergeInto(target: Layered, layer: Layered): void {
  Object.assign(target.values, layer.values);
  Object.assign(target.origins, layer.origins);
}

function readYamlLayer(path: string, readFile: (path: string) => string): Layered {
  const layer = `file ${path}`;
  let document: unknown;
  try {
    document = parseYaml(readFile(path));
  } catch (err) {
    const reason = err instanceof Error ? err.message.split("\n")[0]! : String(err);
    throw new ConfigError([{ field: "config", value: path, layer: "flag --config", reason }]);
  }
  // An empty file is an empty layer, not an error.
  if (document === null || document === undefined) return emptyLayer();
  if (typeof document !== "object" || Array.isArray(document)) {
    throw new ConfigError([
      { field: "config", value: path, layer, reason: "must be a YAML mapping of settings" },
    ]);
  }
  const layered = emptyLayer();
  for (const key of Object.keys(document)) {
    layered.values[key] = (document as Record<string, unknown>)[key];
    layered.origins[key] = layer;
  }
  return layered;
}

function readEnvLayer(env: Readonly<Record<string, string | undefined>>): Layered {
  const layered = emptyLayer();
  for (const field of FIELDS) {
    const { env: name, kind } = FIELD_SOURCES[field];
    const text = env[name];
    // An empty variable (common in systemd environment files) means "not set".
    if (text === undefined || text === "") continue;
    layered.values[field] = fromText(kind, text);
    layered.origins[field] = `env ${name}`;
  }
  return layered;
}

function readFlags(argv: readonly string[]): { configFile?: string; layer: Layered } {
  const options = Object.fromEntries(
    ["config", ...FIELD_BY_FLAG.keys()].map((flag) => [flag, { type: "string" as const }]),
  );
  // Not strict: unknown flags come back as tokens, so each is reported by name.
  const { tokens } = parseArgs({
    args: [...argv],
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  const layer = emptyLayer();
  const problems: ConfigProblem[] = [];
  let configFile: string | undefined;
  for (const token of tokens) {
    if (token.kind === "positional") {
      problems.push({
        field: "arguments",
        value: token.value,
        layer: "flags",
        reason: "unexpected argument; settings are given as --name value",
      });
      continue;
    }
    if (token.kind !== "option") continue;
    const flagLayer = `flag ${token.rawName}`;
    const field = FIELD_BY_FLAG.get(token.name);
    if (token.name !== "config" && field === undefined) {
      problems.push({
        field: token.rawName,
        value: token.value,
        layer: flagLayer,
        reason: `unknown flag; known flags: ${KNOWN_FLAGS.join(", ")}`,
      });
      continue;
    }
    if (token.value === undefined) {
      problems.push({
        field: token.rawName,
        value: undefined,
        layer: flagLayer,
        reason: `needs a value (${token.rawName} value or ${token.rawName}=value)`,
      });
      continue;
    }
    if (field === undefined) {
      configFile = token.value;
      continue;
    }
    const { kind } = FIELD_SOURCES[field];
    const value = fromText(kind, token.value);
    // A repeated list flag adds to the list; any other repeated flag keeps the last value.
    const previous = layer.values[field];
    layer.values[field] =
      kind === "list" && Array.isArray(previous) && Array.isArray(value)
        ? [...previous, ...value]
        : value;
    layer.origins[field] = flagLayer;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return configFile === undefined ? { layer } : { configFile, layer };
}

function toProblems(issue: z.core.$ZodIssue, merged: Layered): ConfigProblem[] {
  if (issue.code === "unrecognized_keys") {
    return issue.keys.map((key) => ({
      field: key,
      value: merged.values[key],
      layer: merged.origins[key] ?? "default",
      reason: `unknown setting; known settings: ${FIELDS.join(", ")}`,
    }));
  }
  const [head, ...rest] = issue.path;
  const root = String(head ?? "");
  return [
    {
      field:
        root +
        rest.map((part) => (typeof part === "number" ? `[${part}]` : `.${String(part)}`)).join(""),
      value: valueAt(merged.values, issue.path),
      layer: merged.origins[root] ?? "default",
      reason: issue.message,
    },
  ];
}

function valueAt(root: unknown, path: readonly PropertyKey[]): unknown {
  let value = root;
  for (const part of path) {
    if (value === null || typeof value !== "object") return undefined;
    // Own keys only: a path into a setting never reads what Object.prototype holds.
    value = Object.hasOwn(value, part) ? (value as Record<PropertyKey, unknown>)[part] : undefined;
  }
  return value;
}
