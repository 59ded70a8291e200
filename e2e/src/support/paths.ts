import { fileURLToPath } from "node:url";

// This file sits at e2e/src/support (run by vitest) or e2e/dist/support (compiled): both are
// three levels below the repository root.
export const REPO_ROOT = fileURLToPath(new URL("../../../", import.meta.url));

export const CONTROL_PLANE_BIN = `${REPO_ROOT}control-plane/dist/bin/clawgate-control-plane.js`;
export const CLAWCTL_BIN = `${REPO_ROOT}control-plane/dist/bin/clawctl.js`;
export const DATA_PLANE_BIN = `${REPO_ROOT}data-plane/dist/bin/clawgate-data-plane.js`;
