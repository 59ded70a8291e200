#!/usr/bin/env node
// Committed launcher, so npm links the binary at install time, before the TypeScript is built.
import("../dist/bin/clawctl.js").catch((error) => {
  if (error?.code === "ERR_MODULE_NOT_FOUND" && String(error.message).includes("/dist/bin/")) {
    process.stderr.write("clawctl: not built yet; run `npm run build` in the repository first\n");
    process.exit(1);
  }
  throw error;
});
