import { defineConfig } from "vite";

// The console is served by the control plane at /ui/ (control-plane/src/console/ui-routes.ts):
// relative asset URLs under assets/, hashed names so they can be cached for good, no CDN.
export default defineConfig({
  root: import.meta.dirname,
  base: "./",
  logLevel: "warn",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    assetsDir: "assets",
    // One small bundle; a source map would double what the control plane holds in memory.
    sourcemap: false,
    modulePreload: false,
  },
});
