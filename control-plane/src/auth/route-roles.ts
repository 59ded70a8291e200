import type { Role } from "./roles.js";

/** One row of the table: a route pattern as fastify names it, the methods, the role needed. */
interface RouteRole {
  /** fastify's route pattern ("/v1/upstreams/:name/nodes/:id"), or "*" for every route. */
  route: string;
  /** Methods the row covers, or "*". */
  methods: readonly string[] | "*";
  role: Role;
}

const READS = ["GET", "HEAD", "OPTIONS"];

/**
 * The role each admin route needs, in one place: the first row that matches decides. Public
 * routes (probes, docs) never get here. A new route is covered by the last two rows: reading
 * needs viewer and writing editor, unless a row above says otherwise.
 */
export const ROUTE_ROLES: readonly RouteRole[] = [
  // Tokens grant access, so only an admin reads or changes them.
  { route: "/v1/tokens", methods: "*", role: "admin" },
  { route: "/v1/tokens/:name", methods: "*", role: "admin" },
  // What a backend registering itself needs, and no more (checked per upstream as well).
  { route: "/v1/upstreams/:name/nodes/:id", methods: ["PUT", "DELETE"], role: "registrar" },
  { route: "*", methods: READS, role: "viewer" },
  { route: "*", methods: "*", role: "editor" },
];

/** The role `method` on `route` needs; an unmatched path (404) needs any valid token. */
export function roleNeeded(method: string, route: string | undefined): Role {
  for (const row of ROUTE_ROLES) {
    if (row.route !== "*" && row.route !== route) continue;
    if (row.methods !== "*" && !row.methods.includes(method)) continue;
    return row.role;
  }
  return "admin";
}
