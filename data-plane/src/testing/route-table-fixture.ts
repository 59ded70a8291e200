import { create, type RouteSchema, SnapshotSchema } from "@clawgate/proto";
import { compileSnapshot } from "../compiler/compile-snapshot.js";
import type { CompiledSnapshot } from "../compiler/compiled-types.js";

/** A route as a test writes it; `upstream` defaults to the fixture's one upstream, "u". */
export type RouteInit = NonNullable<Parameters<typeof create<typeof RouteSchema>>[1]>;

/** Compiles routes against one upstream "u", for tests of matching; throws on a NACK. */
export function compileRouteTable(routes: RouteInit[]): CompiledSnapshot {
  const result = compileSnapshot(
    create(SnapshotSchema, {
      version: 1n,
      upstreams: [{ name: "u", nodes: [{ address: "127.0.0.1:1", weight: 1 }] }],
      routes: routes.map((r) => ({ upstream: "u", ...r })),
    }),
  );
  if (!result.ok) throw new Error(result.reason);
  return result.value;
}
