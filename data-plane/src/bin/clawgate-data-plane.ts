#!/usr/bin/env node
import { helpOrVersion, isConfigError, packageVersion } from "@clawgate/runtime";
import { DATA_PLANE_SETTINGS } from "../config/config-schema.js";
import { main } from "../main.js";

const argv = process.argv.slice(2);
// --help and --version print and exit 0 before anything is opened or bound.
const info = helpOrVersion(argv, {
  program: "clawgate-data-plane",
  summary:
    "Clawgate data plane: a proxy that applies the control plane's snapshots and forwards traffic with retries, breakers and health probes.",
  version: packageVersion(new URL("../../package.json", import.meta.url)),
  settings: DATA_PLANE_SETTINGS,
});
if (info !== undefined) {
  process.stdout.write(info);
} else {
  main(argv, process.env).catch((err: unknown) => {
    if (isConfigError(err)) {
      process.stderr.write(`clawgate-data-plane: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(
      `clawgate-data-plane: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  });
}
