#!/usr/bin/env node
import { isConfigError } from "../config/config-error.js";
import { main } from "../main.js";

main().catch((err: unknown) => {
  if (isConfigError(err)) {
    process.stderr.write(`clawgate-data-plane: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(
    `clawgate-data-plane: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
