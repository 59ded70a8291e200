import { createRequire } from "node:module";
import type * as Undici from "undici";

/**
 * The three parts of undici the data plane runs, each loaded from its own file. undici's index
 * also loads fetch, WebSocket, its HTTP cache, mocks, proxy agents and their dependencies on
 * import: about 3 MiB of heap in every data plane (module sources and compiled code) for code
 * it never runs, and about 70 ms of boot. The types are still undici's own (type-only import).
 *
 * The index also attaches its request helpers (request, stream, pipeline, connect, upgrade) to
 * every dispatcher, and undici's types promise them: they are attached here too (small
 * modules), so a pool has every method its type names. undici declares no exports map, so
 * these paths are part of what it publishes; its version is pinned by the lockfile, and
 * undici-parts.test.ts checks they are the index's own.
 */
const require = createRequire(import.meta.url);

Object.assign(
  require("undici/lib/dispatcher/dispatcher.js").prototype,
  require("undici/lib/api/index.js"),
);

export const Pool: typeof Undici.Pool = require("undici/lib/dispatcher/pool.js");
export const errors: typeof Undici.errors = require("undici/lib/core/errors.js");
export const buildConnector: typeof Undici.buildConnector = require("undici/lib/core/connect.js");
