import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { parse as parseYaml } from "yaml";
import type { z } from "zod";
import {
  type ControlPlaneSettings,
  controlPlaneEnvironment,
  controlPlaneSettingsSchema,
} from "./settings.js";

/** A setting that failed validation; the binary prints it and exits with status 2. */
export class ConfigError extends Error {
  readonly code = "CLAWGATE_INVALID_CONFIG";
}

type Shape = typeof controlPlaneSettingsSchema.shape;
type Layer = Partial<Record<keyof ControlPlaneSettings, unknown>>;

const flagNames = Object.keys(controlPlaneSettingsSchema.shape).map((key) => kebab(key));

/**
 * Layers, lowest first: defaults, the YAML file named by --config, CLAWGATE_* variables,
 * command-line flags. Each later layer overrides single settings of the earlier ones.
 */
export function loadControlPlaneSettings(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ControlPlaneSettings {
  const { values } = parseFlags(argv);
  const layers: { name: string; values: Layer }[] = [];
  if (typeof values.config === "string") {
    layers.push({ name: `file ${values.config}`, values: readYamlLayer(values.config) });
  }
  layers.push({ name: "environment", values: environmentLayer(env) });
  layers.push({ name: "flags", values: flagLayer(values) });

  // Null prototype: a YAML key "__proto__" must stay a key (reported as unknown), not replace
  // the prototype and hand validation settings nobody can see.
  const merged: Layer = Object.create(null);
  const origin = new Map<string, string>();
  for (const layer of layers) {
    for (const [key, value] of Object.entries(layer.values)) {
      if (value === undefined) continue;
      merged[key as keyof ControlPlaneSettings] = value;
      origin.set(key, layer.name);
    }
  }
  const parsed = controlPlaneSettingsSchema.safeParse(merged);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => {
      const field = issue.path.map(String).join(".");
      const top = String(issue.path[0] ?? "");
      const from = origin.get(top) ?? "defaults";
      return `${field}: ${issue.message} (got ${JSON.stringify(merged[top as keyof Layer])} from ${from})`;
    });
    throw new ConfigError(`invalid control-plane settings:\n  ${lines.join("\n  ")}`);
  }
  return Object.freeze(parsed.data);
}

function parseFlags(argv: readonly string[]) {
  const options: Record<string, { type: "string" }> = { config: { type: "string" } };
  for (const name of flagNames) options[name] = { type: "string" };
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false });
  } catch (error) {
    throw new ConfigError((error as Error).message);
  }
}

function readYamlLayer(path: string): Layer {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as Error).message}`);
  }
  const document: unknown = parseYaml(text);
  if (document === null || document === undefined) return {};
  if (typeof document !== "object" || Array.isArray(document)) {
    throw new ConfigError(`config file ${path} must hold a mapping of settings`);
  }
  return document as Layer;
}

function environmentLayer(env: NodeJS.ProcessEnv): Layer {
  const layer: Layer = {};
  for (const [variable, key] of Object.entries(controlPlaneEnvironment)) {
    const raw = env[variable];
    if (raw === undefined || raw === "") continue;
    layer[key] = fromText(key, raw);
  }
  return layer;
}

function flagLayer(values: Record<string, unknown>): Layer {
  const layer: Layer = {};
  for (const key of Object.keys(controlPlaneSettingsSchema.shape) as (keyof Shape)[]) {
    const raw = values[kebab(key)];
    if (typeof raw === "string") layer[key] = fromText(key, raw);
  }
  return layer;
}

/** Variables and flags are text; lists are comma-separated and numbers are decimal. */
function fromText(key: keyof ControlPlaneSettings, raw: string): unknown {
  const schema = controlPlaneSettingsSchema.shape[key] as z.ZodType;
  const sample = schema.safeParse(undefined);
  const fallback = sample.success ? sample.data : undefined;
  if (Array.isArray(fallback)) {
    return raw
      .split(",")
      .map((part) => part.trim())
      .filter(Boolean);
  }
  if (typeof fallback === "number") return /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw;
  return raw;
}

function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);
}
