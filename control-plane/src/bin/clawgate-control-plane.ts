#!/usr/bin/env node
import { helpOrVersion, isConfigError, packageVersion } from "@clawgate/runtime";
import { CONTROL_PLANE_SETTINGS } from "../config/settings.js";
import { main } from "../main.js";

const argv = process.argv.slice(2);
// --help and --version print and exit 0 before anything is opened or bound.
const info = helpOrVersion(argv, {
  program: "clawgate-control-plane",
  summary:
    "Clawgate control plane: admin API, config store (etcd or embedded) and the gRPC snapshot stream to the data planes.",
  version: packageVersion(new URL("../../package.json", import.meta.url)),
  settings: CONTROL_PLANE_SETTINGS,
});
if (info !== undefined) {
  process.stdout.write(info);
} else {
  main(argv, process.env).catch((error: unknown) => {
    if (isConfigError(error)) {
      process.stderr.write(`clawgate-control-plane: ${error.message}\n`);
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
}
