/**
 * The roles a token can hold. `admin` does everything, `editor` writes config, `viewer` only
 * reads, `registrar` only registers and deregisters nodes of the upstreams it was granted.
 */
export const ROLES = ["admin", "editor", "viewer", "registrar"] as const;
export type Role = (typeof ROLES)[number];

/** Who made a request: the token's name and role, and for a registrar its upstreams. */
export interface Caller {
  name: string;
  role: Role;
  /** Upstreams a registrar may register nodes in; empty for every other role. */
  upstreams: readonly string[];
}

/**
 * Roles that include another: an editor may do what a viewer may, and may register nodes
 * itself (it could write them into the upstream's document anyway). A registrar includes
 * nothing: it cannot even read, so a leaked backend token shows no config.
 */
const INCLUDES: Record<Role, readonly Role[]> = {
  admin: ["admin", "editor", "viewer", "registrar"],
  editor: ["editor", "viewer", "registrar"],
  viewer: ["viewer"],
  registrar: ["registrar"],
};

export function roleAllows(held: Role, needed: Role): boolean {
  return INCLUDES[held].includes(needed);
}
