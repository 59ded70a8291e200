// The compiler alone, for the control plane: it checks config with the data plane's own rules
// without loading the proxy, the admin server or the snapshot client.
export {
  DEFAULT_RETRY_ATTEMPTS,
  DEFAULT_RETRY_ON,
  isHeaderName,
  isHostHeader,
  isRouteHost,
  isRoutePath,
  ROUTE_PATH_RULE,
} from "./compile-route.js";
export { compileSnapshot } from "./compile-snapshot.js";
export {
  DEFAULT_KEEP_ALIVE_TIMEOUT_MS,
  MAX_KEEP_ALIVE_TIMEOUT_MS,
  RESOURCE_NAME,
} from "./compile-upstream.js";
export type { CompiledSnapshot, CompileResult } from "./compiled-types.js";
export { type ParsedAddress, parseNodeAddress } from "./node-address.js";
export {
  isRequestPath,
  MAX_REQUEST_PATH_LENGTH,
  type RequestPathRules,
  requestPathProblem,
} from "./origin-form.js";
