import { readdir, readFile } from "node:fs/promises";
import { extname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyPluginAsync, FastifyReply } from "fastify";
import { UI_PREFIX } from "../admin/public-routes.js";

/** Built by `npm run build` (vite, control-plane/ui) next to this package's dist/. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL("../../ui/dist", import.meta.url));

export interface UiRoutesOptions {
  /** Directory holding index.html and assets/; default the build output, DEFAULT_UI_DIR. */
  dir?: string;
}

const CONTENT_TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
};

// Everything the page loads comes from this origin; it talks only to this admin API.
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
  "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

interface Asset {
  body: Buffer;
  type: string;
}

/** Reads the built files once: a few small files, served from memory. */
async function loadAssets(dir: string): Promise<Map<string, Asset> | undefined> {
  let index: Buffer;
  try {
    index = await readFile(join(dir, "index.html"));
  } catch {
    return undefined;
  }
  const assets = new Map<string, Asset>([
    ["index.html", { body: index, type: CONTENT_TYPES[".html"]! }],
  ]);
  const assetDir = join(dir, "assets");
  const names = await readdir(assetDir).catch(() => [] as string[]);
  for (const name of names) {
    const type = CONTENT_TYPES[extname(name)] ?? "application/octet-stream";
    assets.set(`assets/${name}`, { body: await readFile(join(assetDir, name)), type });
  }
  return assets;
}

function common(reply: FastifyReply, type: string): FastifyReply {
  return reply
    .type(type)
    .header("x-content-type-options", "nosniff")
    .header("referrer-policy", "no-referrer");
}

/**
 * The fleet console: a static page (no token needed to load it; every call it makes carries
 * one). index.html is revalidated on each load so a new build is picked up; assets/ carry a
 * content hash in their names, so they are cached for good.
 */
export const uiRoutes: FastifyPluginAsync<UiRoutesOptions> = async (app, options) => {
  const assets = await loadAssets(options.dir ?? DEFAULT_UI_DIR);

  const sendIndex = async (_request: unknown, reply: FastifyReply) => {
    const index = assets?.get("index.html");
    if (index === undefined) {
      return common(reply.code(404), "text/plain; charset=utf-8").send(
        "the console was not built: run `npm run build` (it writes control-plane/ui/dist)\n",
      );
    }
    return common(reply, index.type)
      .header("cache-control", "no-cache")
      .header("content-security-policy", CSP)
      .send(index.body);
  };
  const hidden = { schema: { hide: true } };
  app.get(UI_PREFIX, hidden, (_request, reply) => reply.redirect(`${UI_PREFIX}/`, 308));
  app.get(`${UI_PREFIX}/`, hidden, sendIndex);
  app.get<{ Params: { file: string } }>(
    `${UI_PREFIX}/assets/:file`,
    hidden,
    async (request, reply) => {
      const asset = assets?.get(`assets/${request.params.file}`);
      if (asset === undefined) {
        return common(reply.code(404), "text/plain; charset=utf-8").send(
          `no console asset named ${request.params.file}\n`,
        );
      }
      return common(reply, asset.type)
        .header("cache-control", "public, max-age=31536000, immutable")
        .send(asset.body);
    },
  );
};
