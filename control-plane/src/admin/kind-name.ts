import { RESOURCE_KINDS, type ResourceKind } from "@clawgate/proto";

/**
 * Reads a kind as people write it: plural ("routes") as the API and the store spell it, or
 * singular ("route"), in any case. Undefined when it names no kind.
 */
export function parseKind(input: string): ResourceKind | undefined {
  const lower = input.toLowerCase();
  return RESOURCE_KINDS.find((kind) => kind === lower || kind === `${lower}s`);
}

/** "upstreams" -> "upstream", for messages about one resource. */
export function singularKind(kind: ResourceKind): string {
  return kind.slice(0, -1);
}
