import { parseAllDocuments } from "yaml";
import { ClawctlError } from "./clawctl-error.js";

/** One resource as `clawctl apply` reads it and POST /v1/apply takes it. */
export interface ManifestResource {
  kind: string;
  name: string;
  spec: unknown;
}

const FIELDS = new Set(["kind", "name", "spec"]);

/**
 * Reads a manifest: YAML (JSON is YAML too) holding `{ kind, name, spec }` documents, as
 * several YAML documents, a top-level list, or `{ resources: [...] }`, mixed freely.
 */
export function parseManifest(text: string, source: string): ManifestResource[] {
  const json = parseJson(text);
  if (json !== undefined) return resourcesOf(json.value, source);
  const resources: ManifestResource[] = [];
  const documents = parseAllDocuments(text);
  if (!Array.isArray(documents)) return resources; // an empty stream parses to an empty list
  documents.forEach((document, index) => {
    const where = documents.length > 1 ? `${source} (document ${index + 1})` : source;
    const [error] = document.errors;
    if (error !== undefined) throw new ClawctlError(`${where}: ${error.message}`);
    resources.push(...resourcesOf(document.toJS(), where));
  });
  return resources;
}

/**
 * A manifest that is plain JSON, parsed as such: the YAML parser reads about 1 MB/s, so a
 * 50 MB JSON export would take minutes through it, against under a second here. Anything
 * JSON.parse refuses goes to the YAML parser, which also gives the better error message.
 */
function parseJson(text: string): { value: unknown } | undefined {
  const first = text.trimStart()[0];
  if (first !== "{" && first !== "[") return undefined;
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

function resourcesOf(value: unknown, where: string): ManifestResource[] {
  if (value === null || value === undefined) return [];
  const items = Array.isArray(value)
    ? value
    : isRecord(value) && Array.isArray(value.resources) && !("kind" in value)
      ? value.resources
      : [value];
  return items.map((item: unknown, position: number) => {
    const label = items.length > 1 ? `${where} item ${position + 1}` : where;
    return toResource(item, label);
  });
}

function toResource(item: unknown, where: string): ManifestResource {
  if (!isRecord(item))
    throw new ClawctlError(`${where}: expected a mapping with kind, name and spec`);
  for (const key of Object.keys(item)) {
    if (!FIELDS.has(key))
      throw new ClawctlError(`${where}: unknown field ${key}; use kind, name and spec`);
  }
  const { kind, name, spec } = item;
  if (typeof kind !== "string" || kind === "") throw new ClawctlError(`${where}: kind is required`);
  if (typeof name !== "string" || name === "") throw new ClawctlError(`${where}: name is required`);
  if (spec === undefined)
    throw new ClawctlError(`${where}: spec is required (use {} for defaults)`);
  return { kind, name, spec };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
