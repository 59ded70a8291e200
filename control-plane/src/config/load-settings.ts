import { loadSettings } from "@clawgate/runtime";
import { adminTlsPairingProblems } from "./admin-tls.js";
import { grpcTlsPairingProblems } from "./grpc-tls.js";
import { CONTROL_PLANE_SETTINGS, type ControlPlaneSettings } from "./settings.js";

/**
 * The control plane's settings through the shared layered loader: defaults, the YAML file
 * named by --config, CLAWGATE_* variables, flags, with the TLS pairing checks. A bad value
 * throws a ConfigError (CLAWGATE_INVALID_CONFIG) naming the field, the value and its layer.
 */
export function loadControlPlaneSettings(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ControlPlaneSettings {
  return loadSettings(CONTROL_PLANE_SETTINGS, {
    argv,
    env,
    check: (settings, layerOf) => [
      ...grpcTlsPairingProblems(settings, layerOf),
      ...adminTlsPairingProblems(settings, layerOf),
    ],
  });
}
