import { z } from "zod";

/** What a config write did to one resource; unchanged resources are not listed. */
export const configChangeSchema = z.object({
  /** upstreams, routes, breakers, tenants, tokens or nodes (a registry registration). */
  kind: z.string(),
  /** The resource's name; for a registry node, "upstream/id". */
  name: z.string(),
  action: z.enum(["created", "updated", "deleted"]),
});
export type ConfigChange = z.infer<typeof configChangeSchema>;

/**
 * The stored form of a config event: not its id (the key) nor its revision (the key's mod
 * revision, since the event commits with the change).
 */
export const storedConfigEventSchema = z.object({
  time: z.iso.datetime(),
  /** Name of the token that made the write ("bootstrap" for CLAWGATE_ADMIN_TOKEN). */
  token: z.string(),
  /** The changes, or [] when they are kept in `changeParts` chunks (see change-list.ts). */
  changes: z.array(configChangeSchema),
  /** How many chunk keys under `{prefix}audit-changes/{id}/` hold the changes. */
  changeParts: z.int().min(1).optional(),
  /** Set when the write was a rollback: the version it left and the version it restored. */
  rollback: z.object({ from: z.int(), to: z.int(), reason: z.string().optional() }).optional(),
});

/** One journaled config write, as GET /v1/events?type=config answers it. */
export interface ConfigEvent extends Omit<z.infer<typeof storedConfigEventSchema>, "changeParts"> {
  id: string;
  type: "config";
  /** Store revision the write produced: the config version data planes are sent. */
  revision: number;
}
