import type { KindOverlay } from "./config-overlay.js";
import type { StoredResource } from "./config-state.js";
import { type ClawgateError, clawgateError } from "./errors.js";

/**
 * Refuses a write that leaves a tenant it puts holding an API key hash another tenant holds
 * once the write is made (a tenant already stored, or another of the same apply): two tenants
 * with one hash made the key whichever tenant the data plane indexed last. `tenants` is the
 * config the write was judged on; the write's commit pins it (the guard key every write puts),
 * so two concurrent writes cannot both pass. Only hashes the write puts are looked for, so the
 * cost follows the write, plus one pass over the tenants when it puts any.
 */
export function tenantKeyConflict(
  tenants: ReadonlyMap<string, StoredResource<"tenants">>,
  after: KindOverlay<"tenants">,
): ClawgateError | undefined {
  const put = new Map<string, string[]>();
  for (const [name, tenant] of after.changed) {
    for (const hash of tenant?.document.apiKeySha256 ?? []) {
      const names = put.get(hash);
      if (names === undefined) put.set(hash, [name]);
      else if (!names.includes(name)) names.push(name);
    }
  }
  if (put.size === 0) return undefined;
  // Who holds each of those hashes once the write is made.
  const holders = new Map<string, Set<string>>();
  for (const name of new Set([...tenants.keys(), ...after.changed.keys()])) {
    for (const hash of after.get(name)?.document.apiKeySha256 ?? []) {
      if (!put.has(hash)) continue;
      const names = holders.get(hash);
      if (names === undefined) holders.set(hash, new Set([name]));
      else names.add(name);
    }
  }
  const problems: { kind: string; name: string; path: string; message: string }[] = [];
  for (const [hash, names] of holders) {
    if (names.size < 2) continue;
    for (const name of put.get(hash)!) {
      const others = [...names].filter((other) => other !== name).sort();
      const index = after.get(name)!.document.apiKeySha256.indexOf(hash);
      problems.push({
        kind: "tenants",
        name,
        path: `apiKeySha256.${index}`,
        // The hash is not repeated: it is a credential in all but name.
        message: `tenant ${name} holds an API key hash that tenant ${others.join(", tenant ")} holds too`,
      });
    }
  }
  if (problems.length === 0) return undefined;
  return clawgateError(
    "CLAWGATE_TENANT_KEY_CONFLICT",
    [...new Set(problems.map((problem) => problem.message))].join("; "),
    problems,
  );
}
