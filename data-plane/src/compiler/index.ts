// The compiler alone, for the control plane: it checks config with the data plane's own rules
// without loading the proxy, the admin server or the snapshot client.
export { isHeaderName, isHostHeader, isRouteHost, isRoutePath } from "./compile-route.js";
export { compileSnapshot } from "./compile-snapshot.js";
export { RESOURCE_NAME } from "./compile-upstream.js";
export type { CompiledSnapshot, CompileResult } from "./compiled-types.js";
export { type ParsedAddress, parseNodeAddress } from "./node-address.js";
export {
  isRequestPath,
  MAX_REQUEST_PATH_LENGTH,
  type RequestPathRules,
  requestPathProblem,
} from "./origin-form.js";
