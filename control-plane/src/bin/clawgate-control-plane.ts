#!/usr/bin/env node
import type { ConfigError } from "../config/load-settings.js";
import { main } from "../main.js";

main(process.argv.slice(2), process.env).catch((error: unknown) => {
  if ((error as ConfigError).code === "CLAWGATE_INVALID_CONFIG") {
    process.stderr.write(`clawgate-control-plane: ${(error as ConfigError).message}\n`);
    process.exit(2);
  }
  // A store another control plane holds is an operator's mistake, not a bug: the message says
  // it all (file, holder), a stack trace would only bury it.
  if ((error as { code?: unknown }).code === "CLAWGATE_STORE_LOCKED") {
    process.stderr.write(`clawgate-control-plane: ${(error as Error).message}\n`);
    process.exit(1);
  }
  process.stderr.write(`clawgate-control-plane: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
