#!/usr/bin/env node
import type { ConfigError } from "../config/load-settings.js";
import { main } from "../main.js";

main(process.argv.slice(2), process.env).catch((error: unknown) => {
  if ((error as ConfigError).code === "CLAWGATE_INVALID_CONFIG") {
    process.stderr.write(`clawgate-control-plane: ${(error as ConfigError).message}\n`);
    process.exit(2);
  }
  process.stderr.write(`clawgate-control-plane: ${(error as Error).stack ?? String(error)}\n`);
  process.exit(1);
});
